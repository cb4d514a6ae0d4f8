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

// burstHeadroom is the requests a minute kept back from a limit for the
// server's rate limiter. In Temporal 1.32 each task queue partition
// limits dispatches to rate/partitions with a burst of one second's
// worth, so any 60 s can hold up to 61*rate + partitions tasks of a
// queue (service/matching/ratelimit_manager.go, matcher_data.go). A
// queue has four partitions on a cluster left at its defaults (the
// embedded server runs one); two queues per provider: eight.
const burstHeadroom = 8

// rateSeconds is the window the rate is spread over: 61 s of a 60 s
// window (the burst second) and one more for the limiter's rounding.
const rateSeconds = 62

// QueueRates splits a provider's fleet-wide limit of perMinute requests
// into the rates, a second, of its send queue and its lookup queue:
// after the headroom, three quarters for sends, one for lookups, so a
// backlog of status lookups never delays a send. Zero means no limit.
// Worst case in any 60 s: 61*(send+lookup) + burstHeadroom < perMinute.
func QueueRates(perMinute int) (send, lookup float64, err error) {
	if perMinute == 0 {
		return 0, 0, nil
	}
	if perMinute < burstHeadroom+4 {
		return 0, 0, fmt.Errorf("a rate limit of %d requests a minute leaves no room: give at least %d, or 0 for none", perMinute, burstHeadroom+4)
	}
	budget := float64(perMinute-burstHeadroom) / rateSeconds
	return budget * 3 / 4, budget / 4, nil
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
// beside it. stop stops them all.
//
// tuning sets every worker's polling, its sticky cache and how long stop
// waits for activities in flight (Tuning.Apply must have run).
func StartWorkers(c client.Client, queue string, acts *activities.Activities, limits map[provider.Name]int, tuning Tuning) (stop func(), err error) {
	main := worker.New(c, queue, tuning.WorkerOptions())
	Register(main, acts)
	if err := main.Start(); err != nil {
		return nil, fmt.Errorf("start the worker on task queue %s: %w", queue, err)
	}
	stopProviders, err := StartProviderWorkers(c, queue, acts, limits, tuning)
	if err != nil {
		main.Stop()
		return nil, err
	}
	return func() {
		// In parallel: each waits up to the stop timeout for its activities.
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); stopProviders() }()
		go func() { defer wg.Done(); main.Stop() }()
		wg.Wait()
	}, nil
}

// StartProviderWorkers starts, for each configured provider, a worker on
// its send queue and one on its lookup queue beside runQueue, each with
// the queue's fleet-wide rate. Every worker of the fleet must give the
// same limits: the server keeps the last one a poller sent.
func StartProviderWorkers(c client.Client, runQueue string, acts *activities.Activities, limits map[provider.Name]int, tuning Tuning) (stop func(), err error) {
	var started []worker.Worker
	stop = func() {
		var wg sync.WaitGroup
		for _, w := range started {
			wg.Add(1)
			go func() { defer wg.Done(); w.Stop() }()
		}
		wg.Wait()
	}
	for _, p := range provider.Names {
		if _, ok := acts.Providers[p]; !ok {
			continue
		}
		send, lookup, err := QueueRates(limits[p])
		if err != nil {
			stop()
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		for _, q := range []struct {
			purpose string
			rate    float64
		}{{contract.PurposeSend, send}, {contract.PurposeLookup, lookup}} {
			name := contract.ProviderTaskQueue(runQueue, string(p), q.purpose)
			opts := tuning.WorkerOptions()
			opts.TaskQueueActivitiesPerSecond = q.rate
			// Only activities are scheduled here: no workflow pollers
			// and no sticky queue (the SDK starts both unless told).
			opts.DisableWorkflowWorker = true
			w := worker.New(c, name, opts)
			w.RegisterActivity(acts)
			if err := w.Start(); err != nil {
				stop()
				return nil, fmt.Errorf("start the worker on task queue %s: %w", name, err)
			}
			started = append(started, w)
		}
	}
	return stop, nil
}
