package app

import (
	"fmt"
	"sync"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/provider"
)

// DefaultRateLimits are the providers' published request limits, a
// minute, for the whole fleet: Sendy allows 60 (docs/providers.md); Bird
// publishes none (0: no limit).
var DefaultRateLimits = map[provider.Name]int{provider.Sendy: 60, provider.Bird: 0}

// DefaultPartitions is the partitions of a task queue on a Temporal
// cluster left at its defaults (matching.numTaskqueueReadPartitions).
// The embedded server, the one of the dev stack and of
// docker-compose.yml, runs one.
const DefaultPartitions = 4

// rateSeconds is the window a rate is spread over: in Temporal 1.32 each
// task queue partition limits dispatches to rate/partitions with a burst
// of one second's worth, so any 60 s can hold up to 61*rate + partitions
// tasks of a queue (service/matching/ratelimit_manager.go,
// matcher_data.go); one second more for the limiter's rounding.
const rateSeconds = 62

// QueueLimits are how the workers of a fleet hold each provider to its
// request limit: each provider queue's rate, which the server enforces
// for every poller together.
type QueueLimits struct {
	// PerMinute is each provider's requests a minute for the whole fleet
	// (0: none).
	PerMinute map[provider.Name]int
	// Partitions is the partitions of a task queue on the server; each
	// adds one task of burst to a minute (0: DefaultPartitions).
	Partitions int
}

// Rate is provider p's queue's rate, a second, for the whole fleet: its
// limit, less one request a minute of headroom for each partition's
// burst, spread over rateSeconds. Worst case in any 60 s: 61*rate +
// partitions, below the limit. 0: no limit.
func (l QueueLimits) Rate(p provider.Name) (float64, error) {
	perMinute := l.PerMinute[p]
	if perMinute == 0 {
		return 0, nil
	}
	partitions := l.Partitions
	if partitions == 0 {
		partitions = DefaultPartitions
	}
	if perMinute < partitions+4 {
		return 0, fmt.Errorf("a rate limit of %d requests a minute leaves no room on task queues of %d partitions: give at least %d, or 0 for none", perMinute, partitions, partitions+4)
	}
	return float64(perMinute-partitions) / rateSeconds, nil
}

// pacedLookups marks the policy of each provider with a rate limit
// LookupsPaced: its lookup queue is rate limited, so a run spends no
// dispatch of it on the wait before its first lookup.
func pacedLookups(policies map[provider.Name]activities.Policy, limits map[provider.Name]int) map[provider.Name]activities.Policy {
	out := make(map[provider.Name]activities.Policy, len(policies)+len(limits))
	for p, pol := range policies {
		out[p] = pol
	}
	for p, perMinute := range limits {
		if perMinute > 0 {
			pol := out[p]
			pol.LookupsPaced = true
			out[p] = pol
		}
	}
	return out
}

// StartWorkers starts what one worker process polls: the workflow and
// its activities on queue (where a ledger step that could not run as a
// local activity goes), and each configured provider's queue beside it. Stop stops them all.
//
// tuning sets every worker's polling, its sticky cache and how long stop
// waits for activities in flight (Tuning.Apply must have run).
func StartWorkers(c client.Client, queue string, acts *activities.Activities, limits QueueLimits, tuning Tuning) (*Workers, error) {
	main := worker.New(c, queue, tuning.WorkerOptions())
	Register(main, acts)
	if err := main.Start(); err != nil {
		return nil, fmt.Errorf("start the worker on task queue %s: %w", queue, err)
	}
	w, err := StartProviderWorkers(c, queue, acts, limits, tuning)
	if err != nil {
		main.Stop()
		return nil, err
	}
	w.mu.Lock()
	w.other = append(w.other, main)
	w.mu.Unlock()
	return w, nil
}

// Workers are the Temporal workers of one process.
type Workers struct {
	mu      sync.Mutex
	byQueue map[string]queueWorker // the provider queues polled
	other   []worker.Worker        // the run queue's
}

// queueWorker polls one provider queue at rate.
type queueWorker struct {
	w    worker.Worker
	rate float64
}

// StartProviderWorkers starts, for each configured provider, a worker on
// its one queue beside runQueue, with its fleet-wide rate. Every worker
// of the fleet must give the same limits: the server keeps the last one
// a poller sent.
func StartProviderWorkers(c client.Client, runQueue string, acts *activities.Activities, limits QueueLimits, tuning Tuning) (*Workers, error) {
	w := &Workers{byQueue: map[string]queueWorker{}}
	for _, p := range provider.Names {
		if _, ok := acts.Providers[p]; !ok {
			continue
		}
		rate, err := limits.Rate(p)
		if err == nil {
			err = w.poll(c, contract.ProviderQueue(runQueue, string(p)), acts, rate, tuning)
		}
		if err != nil {
			w.Stop()
			return nil, err
		}
	}
	return w, nil
}

// poll starts a worker of the provider activities on queue at rate (0:
// no limit).
func (w *Workers) poll(c client.Client, queue string, acts *activities.Activities, rate float64, tuning Tuning) error {
	opts := tuning.WorkerOptions()
	opts.TaskQueueActivitiesPerSecond = rate
	// Only activities are scheduled here: no workflow pollers and no
	// sticky queue (the SDK starts both unless told).
	opts.DisableWorkflowWorker = true
	pw := worker.New(c, queue, opts)
	pw.RegisterActivity(acts)
	if err := pw.Start(); err != nil {
		return fmt.Errorf("start the worker on task queue %s: %w", queue, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.byQueue[queue] = queueWorker{w: pw, rate: rate}
	return nil
}

// polls reports whether queue is polled, and at what rate.
func (w *Workers) polls(queue string) (rate float64, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	qw, ok := w.byQueue[queue]
	return qw.rate, ok
}

// Stop stops every worker, in parallel: each waits up to the stop
// timeout for its activities.
func (w *Workers) Stop() {
	w.mu.Lock()
	all := append([]worker.Worker(nil), w.other...)
	for _, qw := range w.byQueue {
		all = append(all, qw.w)
	}
	w.byQueue, w.other = map[string]queueWorker{}, nil
	w.mu.Unlock()
	var wg sync.WaitGroup
	for _, pw := range all {
		wg.Add(1)
		go func() { defer wg.Done(); pw.Stop() }()
	}
	wg.Wait()
}
