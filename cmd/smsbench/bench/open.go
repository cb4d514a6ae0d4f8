package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/starter"
)

// OpenRow is one open-loop scenario: events arrive at Rate a second
// (Poisson arrivals, whatever the answers to earlier ones) for Seconds,
// at Load times the rate bare Temporal sustained at saturation in the
// same run. Latencies count from each event's arrival, so a start that
// waited for a slow server counts its wait.
type OpenRow struct {
	Backend  string  `json:"backend"`
	Scenario string  `json:"scenario"`
	Load     float64 `json:"load"`
	// Fixed marks a row at a fixed rate (Config.OpenRate), whatever
	// bare's saturation; Load is then the share of it that rate was.
	Fixed      bool      `json:"fixed,omitempty"`
	Rate       float64   `json:"ratePerSec"`
	Seconds    float64   `json:"seconds"`
	Events     int       `json:"events"`
	ToAccepted Latencies `json:"toAccepted"`
	ToDone     Latencies `json:"toDone"`
	// Messages is what the simulator created for ours' events.
	Messages int `json:"messages"`
}

// arrivals calls start for each event of a Poisson process of rate a
// second over d, each on its own goroutine at its arrival time, and
// returns the arrival times. The first error stops the arrivals.
func arrivals(ctx context.Context, rate float64, d time.Duration, seed uint64, start func(ctx context.Context, i int) error) ([]time.Time, error) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		at    []time.Time
	)
	t0 := time.Now()
	next := t0
	for i := 0; ; i++ {
		next = next.Add(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
		if next.Sub(t0) >= d {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(next)):
		}
		if ctx.Err() != nil {
			break
		}
		at = append(at, next)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := start(ctx, i); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}()
	}
	wg.Wait()
	return at, first
}

// openLoop runs the open-loop scenarios of one backend: at each load,
// bare then ours, each under a fresh worker.
func (s *stack) openLoop(ctx context.Context, c client.Client, st *starter.Starter, rep *Report) error {
	bare := rep.row(s.backend, ScenarioBare)
	if bare.DonePerSec <= 0 {
		return fmt.Errorf("no saturation rate of bare Temporal to load the open loop from")
	}
	for _, load := range s.cfg.OpenLoads {
		for _, name := range []string{ScenarioBare, ScenarioOurs} {
			row, err := s.open(ctx, c, st, name, load, load*bare.DonePerSec)
			if err != nil {
				return fmt.Errorf("open loop %s at %.0f%%: %w", name, load*100, err)
			}
			rep.Open = append(rep.Open, row)
		}
	}
	if s.cfg.OpenRate <= 0 {
		return nil
	}
	// A realistic rate for one-time codes, the same on every machine.
	for _, name := range []string{ScenarioBare, ScenarioOurs} {
		row, err := s.open(ctx, c, st, name, s.cfg.OpenRate/bare.DonePerSec, s.cfg.OpenRate)
		if err != nil {
			return fmt.Errorf("open loop %s at %.1f events/s: %w", name, s.cfg.OpenRate, err)
		}
		row.Fixed = true
		rep.Open = append(rep.Open, row)
	}
	return nil
}

// open runs one open-loop scenario.
func (s *stack) open(ctx context.Context, c client.Client, st *starter.Starter, name string, load, rate float64) (OpenRow, error) {
	row := OpenRow{Backend: s.backend, Scenario: name, Load: load, Rate: rate, Seconds: s.cfg.OpenFor.Seconds()}
	bare := name == ScenarioBare
	w, err := s.startWorker(ctx, c, workerSpec{name: fmt.Sprintf("worker-open-%s-%.0f", name, load*100), bare: bare, sim: s.sims["main"]})
	if err != nil {
		return row, err
	}
	defer w.Stop(stopGrace)
	s.logf("open loop %s: %.1f events/s (%.0f%% of bare's saturation) for %s", name, rate, load*100, s.cfg.OpenFor)
	since := time.Now().Add(-time.Second)
	pre := prefix(name)
	var mu sync.Mutex
	runs := map[string]*run{}
	keys := map[int]string{} // by arrival
	wfType := contract.WorkflowName
	if bare {
		wfType = BareWorkflowName
	}
	var at []time.Time
	at, err = arrivals(ctx, rate, s.cfg.OpenFor, uint64(load*1000), func(ctx context.Context, i int) error {
		var key string
		if bare {
			key = fmt.Sprintf("%s-%06d", pre, i)
			if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: key, TaskQueue: BareTaskQueue}, BareWorkflowName); err != nil {
				return fmt.Errorf("start bare run %s: %w", key, err)
			}
		} else {
			res, err := st.Send(ctx, event(pre, i, "bird"))
			if err != nil {
				return fmt.Errorf("start event %d: %w", i, err)
			}
			key = res.Key
		}
		mu.Lock()
		runs[key], keys[i] = &run{key: key}, key // its arrival time is filled in below
		mu.Unlock()
		return nil
	})
	if err != nil {
		return row, err
	}
	for i, t := range at {
		r, ok := runs[keys[i]]
		if !ok {
			return row, fmt.Errorf("arrival %d was not started", i)
		}
		r.start = t
	}
	// The last starts are moments old: visibility lists every run first,
	// or "none running" could be read before the last ones show.
	q := visibilityQuery(wfType, since)
	if err := awaitCount(ctx, c, q, int64(len(runs)), time.Minute); err != nil {
		return row, err
	}
	if err := awaitCount(ctx, c, q+" AND ExecutionStatus = 'Running'", 0, timeout(len(runs))); err != nil {
		return row, err
	}
	if row.Messages, err = s.collect(ctx, c, q, runs, bare); err != nil {
		return row, err
	}
	var filled Row
	fill(&filled, runs)
	row.Events, row.ToAccepted, row.ToDone = len(runs), filled.ToAccepted, filled.ToDone
	s.logf("open loop %s: %d events, p99 to accepted %.2f s", name, row.Events, row.ToAccepted.P99)
	return row, nil
}
