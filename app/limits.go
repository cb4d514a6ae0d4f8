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
	// OldQueues: runs from before SendSMS's version 10 may be open, and
	// their activities wait on the provider queues of one purpose each
	// (contract.ProviderTaskQueue). The workers poll those too, with a
	// share of each limit.
	OldQueues bool
}

// Rates are the rates, a second, of one provider's queues: its one
// queue, and the send and lookup queues of runs from before version 10
// (0 when not polled). All 0: no limit.
type Rates struct {
	Queue, OldSend, OldLookup float64
}

// Rates splits provider p's fleet-wide limit over the queues polled.
// After the burst each queue's partitions add: the whole of it to the
// provider's one queue, where priorities order searches, sends and
// lookups; with the old queues, three quarters to it and an eighth to
// each old one. Worst case in any 60 s: the sum over the queues of
// 61*rate + partitions, below the limit.
func (l QueueLimits) Rates(p provider.Name) (Rates, error) {
	perMinute := l.PerMinute[p]
	if perMinute == 0 {
		return Rates{}, nil
	}
	partitions := l.Partitions
	if partitions == 0 {
		partitions = DefaultPartitions
	}
	queues := 1
	if l.OldQueues {
		queues = 3
	}
	headroom := queues * partitions
	if perMinute < headroom+4 {
		return Rates{}, fmt.Errorf("a rate limit of %d requests a minute leaves no room on task queues of %d partitions: give at least %d, or 0 for none", perMinute, partitions, headroom+4)
	}
	budget := float64(perMinute-headroom) / rateSeconds
	if !l.OldQueues {
		return Rates{Queue: budget}, nil
	}
	return Rates{Queue: budget * 3 / 4, OldSend: budget / 8, OldLookup: budget / 8}, nil
}

// lateOldQueueRate is the rate of each old queue of a provider when
// runs from before version 10 turn up after the workers started without
// them (an old worker of a rolling deploy started them): one request a
// minute, so they finish, at the cost of a few requests a minute above
// the limit until the workers restart (QueueLimits.OldQueues).
const lateOldQueueRate = 1.0 / rateSeconds

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
// every activity on queue (runs from before the provider queues
// schedule their sends there), and each configured provider's queues
// beside it. Stop stops them all.
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
	w.started = append(w.started, main)
	return w, nil
}

// Workers are the Temporal workers of one process.
type Workers struct {
	c        client.Client
	runQueue string
	acts     *activities.Activities
	tuning   Tuning
	limits   QueueLimits

	mu      sync.Mutex
	started []worker.Worker
	stopped bool
}

// StartProviderWorkers starts, for each configured provider, a worker on
// its one queue beside runQueue, and with limits.OldQueues one on each
// of its old queues (send and lookup), each with its fleet-wide rate.
// Every worker of the fleet must give the same limits: the server keeps
// the last one a poller sent.
func StartProviderWorkers(c client.Client, runQueue string, acts *activities.Activities, limits QueueLimits, tuning Tuning) (*Workers, error) {
	w := &Workers{c: c, runQueue: runQueue, acts: acts, tuning: tuning, limits: limits}
	for _, p := range provider.Names {
		if _, ok := acts.Providers[p]; !ok {
			continue
		}
		r, err := limits.Rates(p)
		if err != nil {
			w.Stop()
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if err := w.poll(contract.ProviderQueue(runQueue, string(p)), r.Queue); err != nil {
			w.Stop()
			return nil, err
		}
		if limits.OldQueues {
			if err := w.pollOld(p, r.OldSend, r.OldLookup); err != nil {
				w.Stop()
				return nil, err
			}
		}
	}
	return w, nil
}

// PollOldQueues starts polling the old queues of every configured
// provider at lateOldQueueRate, where the workers started without them
// and runs from before version 10 turned up. It does nothing when they
// are polled already or the workers stopped.
func (w *Workers) PollOldQueues() error {
	w.mu.Lock()
	old, stopped := w.limits.OldQueues, w.stopped
	w.limits.OldQueues = true
	w.mu.Unlock()
	if old || stopped {
		return nil
	}
	for _, p := range provider.Names {
		if _, ok := w.acts.Providers[p]; !ok {
			continue
		}
		rate := 0.0
		if w.limits.PerMinute[p] > 0 {
			rate = lateOldQueueRate
		}
		if err := w.pollOld(p, rate, rate); err != nil {
			return err
		}
	}
	return nil
}

// oldQueues reports whether the old queues are polled.
func (w *Workers) oldQueues() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.limits.OldQueues
}

// pollOld polls provider p's send and lookup queues of runs from before
// version 10.
func (w *Workers) pollOld(p provider.Name, send, lookup float64) error {
	if err := w.poll(contract.ProviderTaskQueue(w.runQueue, string(p), contract.PurposeSend), send); err != nil {
		return err
	}
	return w.poll(contract.ProviderTaskQueue(w.runQueue, string(p), contract.PurposeLookup), lookup)
}

// poll starts a worker of the provider activities on queue at rate (0:
// no limit).
func (w *Workers) poll(queue string, rate float64) error {
	opts := w.tuning.WorkerOptions()
	opts.TaskQueueActivitiesPerSecond = rate
	// Only activities are scheduled here: no workflow pollers and no
	// sticky queue (the SDK starts both unless told).
	opts.DisableWorkflowWorker = true
	pw := worker.New(w.c, queue, opts)
	pw.RegisterActivity(w.acts)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return nil
	}
	if err := pw.Start(); err != nil {
		return fmt.Errorf("start the worker on task queue %s: %w", queue, err)
	}
	w.started = append(w.started, pw)
	return nil
}

// Stop stops every worker, in parallel: each waits up to the stop
// timeout for its activities.
func (w *Workers) Stop() {
	w.mu.Lock()
	started := w.started
	w.started, w.stopped = nil, true
	w.mu.Unlock()
	var wg sync.WaitGroup
	for _, pw := range started {
		wg.Add(1)
		go func() { defer wg.Done(); pw.Stop() }()
	}
	wg.Wait()
}
