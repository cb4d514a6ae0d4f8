package app

import (
	"errors"
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
	w.mu.Lock()
	w.other = append(w.other, main)
	w.mu.Unlock()
	return w, nil
}

// QueueMode is what a process polls of each provider's queues.
type QueueMode int

const (
	// OnlyProviderQueues: each provider's queue, with the whole limit.
	OnlyProviderQueues QueueMode = iota
	// Lowered: each provider's queue with three quarters of the limit,
	// and no old queue. A process passes through it on its way between
	// the other two, long enough for the requests of the minute before to
	// leave the provider's window (App.watchOldQueues).
	Lowered
	// WithOldQueues: each provider's queue with three quarters of the
	// limit, and the send and lookup queues of runs from before version
	// 10 with an eighth each.
	WithOldQueues
)

func (m QueueMode) String() string {
	return [...]string{"provider queues", "provider queues lowered", "provider queues and the old queues"}[m]
}

// Workers are the Temporal workers of one process.
type Workers struct {
	c        client.Client
	runQueue string
	acts     *activities.Activities
	tuning   Tuning
	limits   QueueLimits

	mu      sync.Mutex
	mode    QueueMode
	byQueue map[string]queueWorker // the provider queues polled
	other   []worker.Worker        // the run queue's
	stopped bool
	// retiring are the workers a new rate replaced or a mode dropped,
	// stopping in the background (each waits for its activities).
	retiring sync.WaitGroup
}

// queueWorker polls one provider queue at rate.
type queueWorker struct {
	w    worker.Worker
	rate float64
}

// StartProviderWorkers starts, for each configured provider, a worker on
// its one queue beside runQueue, each with its fleet-wide rate. With
// limits.OldQueues (runs from before version 10 may be open) the
// workers start Lowered, and App.watchOldQueues moves them on. Every
// worker of the fleet must give the same limits: the server keeps the
// last one a poller sent.
func StartProviderWorkers(c client.Client, runQueue string, acts *activities.Activities, limits QueueLimits, tuning Tuning) (*Workers, error) {
	w := &Workers{c: c, runQueue: runQueue, acts: acts, tuning: tuning, limits: limits, byQueue: map[string]queueWorker{}}
	w.limits.OldQueues = false
	mode := OnlyProviderQueues
	if limits.OldQueues {
		mode = Lowered
	}
	if _, err := w.SetMode(mode); err != nil {
		w.Stop()
		return nil, err
	}
	return w, nil
}

// errNoRoom marks a provider whose limit leaves no room for the old
// queues beside its queue: its old queues are not polled.
var errNoRoom = errors.New("no room for the old queues")

// providerRates are one provider's rates with and without the old queues.
type providerRates struct {
	p             provider.Name
	whole, shared Rates
	// room: the limit leaves room for the old queues (else shared is
	// whole, and the old queues are not polled).
	room bool
}

// rates are the rates of every configured provider; noRoom reports each
// whose limit leaves no room for the old queues.
func (w *Workers) rates() (out []providerRates, noRoom error) {
	var errs []error
	for _, p := range provider.Names {
		if _, ok := w.acts.Providers[p]; !ok {
			continue
		}
		only := w.limits
		only.OldQueues = false
		whole, err := only.Rates(p)
		if err != nil { // Validate refused it before: cannot happen
			whole = Rates{}
		}
		shared := w.limits
		shared.OldQueues = true
		r := providerRates{p: p, whole: whole, shared: whole}
		if sr, err := shared.Rates(p); err == nil {
			r.shared, r.room = sr, true
		} else {
			errs = append(errs, fmt.Errorf("%w of %s: --%s-rate-limit: %w", errNoRoom, p, p, err))
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

// Mode is the mode the process is in: the last one SetMode reached, or,
// after a change that failed midway, the riskier of the two it was
// between (App.watchOldQueues then waits as if it had been reached).
func (w *Workers) Mode() QueueMode {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mode
}

// SetMode polls each configured provider's queues as mode says, in an
// order that keeps every moment within the limits: first it stops the
// old queues mode leaves out, then lowers the provider queues mode
// lowers, and only when those are done raises provider queues or starts
// old queues. A queue whose rate changes gets a new worker and its old
// one stops in the background. After an error it may be called again:
// what is done already is not done twice. A provider whose limit leaves
// no room for the old queues keeps its whole rate and no old queue:
// noRoom (wrapping errNoRoom) names each.
func (w *Workers) SetMode(mode QueueMode) (noRoom, err error) {
	rates, noRoom := w.rates()
	if mode == OnlyProviderQueues {
		noRoom = nil
	}
	defer func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		// Into Lowered, a failure leaves the mode before (riskier: some
		// queue may still be at the whole rate, or an old queue polled);
		// into another, a failure counts as reaching it.
		if err == nil || mode != Lowered {
			w.mode = mode
		}
	}()
	for _, r := range rates {
		if mode != WithOldQueues || !r.room {
			for _, q := range oldQueuesOf(w.runQueue, r.p) {
				w.drop(q)
			}
		}
	}
	target := func(r providerRates) float64 {
		if mode == OnlyProviderQueues {
			return r.whole.Queue
		}
		return r.shared.Queue
	}
	// Lower first, then raise: a limited queue's rate only goes down here
	// (0 is no limit, the highest).
	lower := func(now, to float64) bool { return to != 0 && (now == 0 || to < now) }
	for _, r := range rates {
		queue := contract.ProviderQueue(w.runQueue, string(r.p))
		now, polled := w.polls(queue)
		if polled && lower(now, target(r)) {
			if err := w.poll(queue, target(r)); err != nil {
				return noRoom, err
			}
		}
	}
	for _, r := range rates {
		if err := w.poll(contract.ProviderQueue(w.runQueue, string(r.p)), target(r)); err != nil {
			return noRoom, err
		}
		if mode != WithOldQueues || !r.room {
			continue
		}
		old := oldQueuesOf(w.runQueue, r.p)
		for i, rate := range []float64{r.shared.OldSend, r.shared.OldLookup} {
			if err := w.poll(old[i], rate); err != nil {
				return noRoom, err
			}
		}
	}
	return noRoom, nil
}

// oldQueuesOf are provider p's send and lookup queues beside runQueue,
// which runs from before version 10 use.
func oldQueuesOf(runQueue string, p provider.Name) [2]string {
	return [2]string{
		contract.ProviderTaskQueue(runQueue, string(p), contract.PurposeSend),
		contract.ProviderTaskQueue(runQueue, string(p), contract.PurposeLookup),
	}
}

// poll makes sure a worker of the provider activities polls queue at
// rate (0: no limit).
func (w *Workers) poll(queue string, rate float64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return nil
	}
	old, had := w.byQueue[queue]
	if had && old.rate == rate {
		return nil
	}
	opts := w.tuning.WorkerOptions()
	opts.TaskQueueActivitiesPerSecond = rate
	// Only activities are scheduled here: no workflow pollers and no
	// sticky queue (the SDK starts both unless told).
	opts.DisableWorkflowWorker = true
	pw := worker.New(w.c, queue, opts)
	pw.RegisterActivity(w.acts)
	if err := pw.Start(); err != nil {
		return fmt.Errorf("start the worker on task queue %s: %w", queue, err)
	}
	w.byQueue[queue] = queueWorker{w: pw, rate: rate}
	if had {
		w.retire(old.w)
	}
	return nil
}

// drop stops polling queue.
func (w *Workers) drop(queue string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if old, ok := w.byQueue[queue]; ok {
		delete(w.byQueue, queue)
		w.retire(old.w)
	}
}

// retire stops pw in the background; Stop waits for it. w.mu is held.
func (w *Workers) retire(pw worker.Worker) {
	w.retiring.Add(1)
	go func() { defer w.retiring.Done(); pw.Stop() }()
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
	w.stopped = true
	for _, qw := range w.byQueue {
		w.retire(qw.w)
	}
	for _, pw := range w.other {
		w.retire(pw)
	}
	w.byQueue, w.other = map[string]queueWorker{}, nil
	w.mu.Unlock()
	w.retiring.Wait()
}
