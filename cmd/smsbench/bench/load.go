package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/starter"
)

// run is one event of a scenario as the bench saw it.
type run struct {
	key      string
	start    time.Time // the first start call
	accepted time.Time // the provider's acceptance (bare: the activity ran)
	done     time.Time // the run closed (direct: the status was final)
	events   int64     // history events
}

// parallel calls f for 0..n-1 on c goroutines and returns the first error.
func parallel(ctx context.Context, n, c int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range min(c, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := f(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		}()
	}
feed:
	for i := range n {
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	return first
}

// event is the i-th event of a scenario: a Bird or Sendy order update.
func event(prefix string, i int, provider string) starter.Event {
	return starter.Event{
		Kind: "order", ID: fmt.Sprintf("%s%06d", prefix, i), Stage: "shipped",
		To: "+31612345678", Text: "Your order has shipped and arrives tomorrow.", Provider: provider,
	}
}

// startEvents starts n events through the starter, each copies times at
// once, and returns the runs by key with their first start time.
func startEvents(ctx context.Context, st *starter.Starter, prefix string, n, copies, conc int, provider string) (map[string]*run, error) {
	var mu sync.Mutex
	runs := make(map[string]*run, n)
	err := parallel(ctx, n, conc, func(ctx context.Context, i int) error {
		e := event(prefix, i, provider)
		t0 := time.Now()
		errs := make([]error, copies)
		keys := make([]string, copies)
		var wg sync.WaitGroup
		for c := range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := st.Send(ctx, e)
				errs[c], keys[c] = err, res.Key
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("start event %d: %w", i, err)
		}
		mu.Lock()
		runs[keys[0]] = &run{key: keys[0], start: t0}
		mu.Unlock()
		return nil
	})
	return runs, err
}

// startBare starts n bare runs.
func startBare(ctx context.Context, c client.Client, prefix string, n, conc int) (map[string]*run, error) {
	var mu sync.Mutex
	runs := make(map[string]*run, n)
	err := parallel(ctx, n, conc, func(ctx context.Context, i int) error {
		id := fmt.Sprintf("%s-%06d", prefix, i)
		t0 := time.Now()
		if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: BareTaskQueue}, BareWorkflowName); err != nil {
			return fmt.Errorf("start bare run %s: %w", id, err)
		}
		mu.Lock()
		runs[id] = &run{key: id, start: t0}
		mu.Unlock()
		return nil
	})
	return runs, err
}

// visibilityQuery selects the runs of one workflow type started since t.
func visibilityQuery(workflowType string, since time.Time) string {
	return fmt.Sprintf("WorkflowType = '%s' AND StartTime >= '%s'", workflowType, since.UTC().Format(time.RFC3339Nano))
}

// awaitCount polls visibility until the query counts want runs, or
// timeout passes.
func awaitCount(ctx context.Context, c client.Client, query string, want int64, timeout time.Duration) error {
	return awaitCounted(ctx, c, query, timeout, fmt.Sprint(want), func(n int64) bool { return n == want })
}

// awaitCounted polls visibility until the query's count is ok, or
// timeout passes; want says what ok wants, for the error.
func awaitCounted(ctx context.Context, c client.Client, query string, timeout time.Duration, want string, ok func(int64) bool) error {
	deadline := time.Now().Add(timeout)
	var got int64 = -1
	for time.Now().Before(deadline) {
		resp, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: client.DefaultNamespace, Query: query})
		if err == nil {
			if got = resp.GetCount(); ok(got) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return fmt.Errorf("after %s, %d runs match %q, not %s", timeout, got, query, want)
}

// collectClosed reads the close time and history length of every run of
// the query from visibility into runs; it fails unless each closed
// Completed.
func collectClosed(ctx context.Context, c client.Client, query string, runs map[string]*run) error {
	var token []byte
	seen := 0
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: client.DefaultNamespace, Query: query, PageSize: 500, NextPageToken: token,
		})
		if err != nil {
			return fmt.Errorf("list the runs of %q: %w", query, err)
		}
		for _, e := range resp.GetExecutions() {
			r, ok := runs[e.GetExecution().GetWorkflowId()]
			if !ok {
				continue
			}
			if s := e.GetStatus().String(); s != "Completed" {
				return fmt.Errorf("run %s ended %s, not Completed (see its history)", r.key, s)
			}
			r.done, r.events = e.GetCloseTime().AsTime(), e.GetHistoryLength()
			seen++
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	if seen != len(runs) {
		return fmt.Errorf("visibility lists %d of the %d runs of %q", seen, len(runs), query)
	}
	return nil
}

// simMessage is what the bench reads of a simulator's message.
type simMessage struct {
	Key       string    `json:"key"`
	CreatedAt time.Time `json:"createdAt"`
}

// simRequest is what the bench reads of a simulator's request log.
type simRequest struct {
	At     time.Time `json:"at"`
	Method string    `json:"method"`
	Status int       `json:"status"`
}

// getJSON decodes GET url into v.
func getJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// acceptances reads when the simulator created each message of runs, and
// returns how many messages it created for them in all.
func acceptances(ctx context.Context, simURL, provider string, runs map[string]*run) (int, error) {
	var out struct {
		Messages []simMessage `json:"messages"`
	}
	if err := getJSON(ctx, simURL+"/_sim/messages?provider="+provider, &out); err != nil {
		return 0, err
	}
	n := 0
	for _, m := range out.Messages {
		r, ok := runs[m.Key]
		if !ok {
			continue
		}
		n++
		if r.accepted.IsZero() || m.CreatedAt.Before(r.accepted) {
			r.accepted = m.CreatedAt
		}
	}
	return n, nil
}

// bareAcceptances reads each bare run's result: when its activity ran.
func bareAcceptances(ctx context.Context, c client.Client, runs map[string]*run, conc int) error {
	ids := make([]string, 0, len(runs))
	for id := range runs {
		ids = append(ids, id)
	}
	return parallel(ctx, len(ids), conc, func(ctx context.Context, i int) error {
		var at time.Time
		if err := c.GetWorkflow(ctx, ids[i], "").Get(ctx, &at); err != nil {
			return fmt.Errorf("result of bare run %s: %w", ids[i], err)
		}
		runs[ids[i]].accepted = at // distinct keys: no two goroutines write one run
		return nil
	})
}

// ourQuery selects the orchestrator's runs started since t.
func ourQuery(since time.Time) string { return visibilityQuery(contract.WorkflowName, since) }

// collect reads, once every run of the query has closed, each run's
// close time and history length, and when it was accepted: a bare run's
// result, or the simulator's first message of the event, whose count it
// returns (0 for bare runs).
func (s *stack) collect(ctx context.Context, c client.Client, q string, runs map[string]*run, bare bool) (messages int, err error) {
	if err := collectClosed(ctx, c, q, runs); err != nil {
		return 0, err
	}
	if bare {
		return 0, bareAcceptances(ctx, c, runs, s.cfg.Concurrency)
	}
	return acceptances(ctx, s.sims["main"], "bird", runs)
}
