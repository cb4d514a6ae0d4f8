package workflows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
)

const key = "order-58213-shipped"

var input = contract.Input{Key: key, Provider: "bird", To: "+31612345678", Text: "Order 58213 has shipped."}

// harness is a test environment with every activity mocked; tests
// override the mocks they care about before calling run.
type harness struct {
	t      *testing.T
	env    *testsuite.TestWorkflowEnvironment
	start  time.Time
	policy activities.Policy

	mu      sync.Mutex
	sends   []activities.SendInput
	sendAt  []time.Duration // since start, on the workflow clock
	settled *activities.SettleInput
	// settleErr, when set, is what every Settle returns.
	settleErr error
	// recall, when set, answers Recall; by default the ledger holds the
	// mocked sends under their keys, none of them uncertain.
	recall func(in activities.RecallInput) activities.RecallOutput
	// settles are every Settle asked for, refused ones included.
	settles []activities.SettleInput
	// states are the SmsState values the run upserted, in order.
	states []string
	// settleUnknown, when set, answers the first checked Settle.
	settleUnknown *activities.SettleOutput
	// ledgerDown, when set, says when (since the start) Recall fails.
	ledgerDown func(since time.Duration) bool
}

// quiet is the log level of a harness whose run logs only what its test
// makes happen (a ledger that is down, searches that fail): none.
const quiet = zap.ErrorLevel + 1

// newBareHarness is the test environment of one run of SendSMS under
// the event key, with the SmsState values it upserts observed and no
// activity mocked; logs is the least level its logger shows. Each
// harness adds its Settle and Recall: testify answers with the first
// expectation registered, so a mock set here could not be replaced.
func newBareHarness(t *testing.T, logs zapcore.Level) *harness {
	t.Helper()
	var ts testsuite.WorkflowTestSuite
	ts.SetLogger(logging.SDK(zaptest.NewLogger(t, zaptest.Level(logs))))
	env := ts.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(SendSMS, workflow.RegisterOptions{Name: contract.WorkflowName})
	env.RegisterActivity(&activities.Activities{})
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: key})
	h := &harness{t: t, env: env, start: env.Now(), policy: activities.DefaultPolicy()}
	observeStates(h)
	return h
}

// newHarness is the usual harness: a ledger that keeps the settle that
// ranks highest and recalls the mocked sends.
func newHarness(t *testing.T) *harness {
	t.Helper()
	h := newBareHarness(t, zap.WarnLevel)
	h.settleByRank()
	h.recallTheSends()
	return h
}

// settleByRank mocks Settle as the ledger does: the first settle wins
// unless a later one ranks higher, and the answer is what it keeps
// (settleErr and settleUnknown, when set, answer instead).
func (h *harness) settleByRank() {
	h.env.OnActivity(a.Settle, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.SettleInput) (activities.SettleOutput, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.settles = append(h.settles, in)
		if h.settleErr != nil {
			return activities.SettleOutput{}, h.settleErr
		}
		if u := h.settleUnknown; u != nil && in.CheckKeys {
			h.settleUnknown = nil
			return *u, nil
		}
		if h.settled == nil || ledger.Outranks(in.Outcome, in.MessageID, h.settled.Outcome, h.settled.MessageID) {
			h.settled = &in // the first settle wins unless a later one ranks higher, as in the ledger
		}
		return activities.SettleOutput{Outcome: h.settled.Outcome, Reason: h.settled.Reason, MessageID: h.settled.MessageID}, nil
	}).Maybe()
}

// recallTheSends mocks Recall: h.recall answers when set; by default the
// ledger holds the mocked sends under their keys, none of them
// uncertain. While ledgerDown says so, Recall fails with an error a
// retry could fix.
func (h *harness) recallTheSends() {
	h.env.OnActivity(a.Recall, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.RecallInput) (activities.RecallOutput, error) {
		if h.ledgerDown != nil && h.ledgerDown(h.env.Now().Sub(h.start)) {
			return activities.RecallOutput{}, temporal.NewApplicationError("ledger: connection refused", "LedgerUnavailable")
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.recall != nil {
			return h.recall(in), nil
		}
		var out activities.RecallOutput
		for i, s := range h.sends {
			if s.Request.Key == in.SendKey {
				if out.Attempts == 0 {
					out.FirstAttemptAt = h.start.Add(h.sendAt[i])
				}
				out.Attempts++
			}
		}
		return out, nil
	}).Maybe()
}

func (h *harness) request(k string) provider.Request {
	return provider.Request{Provider: provider.Bird, Key: k, To: input.To, Text: input.Text, Body: []byte(`{"reference":"` + k + `"}`)}
}

// prepared mocks Prepare as a fresh claim.
func (h *harness) prepared() {
	h.env.OnActivity(a.Prepare, mock.Anything, mock.Anything).Return(activities.PrepareOutput{
		Request: h.request(key), Policy: h.policy, Created: true,
	}, nil).Once()
}

// sendWith mocks Send with a function of the attempt number and the
// input, and records each input and when it came.
func (h *harness) sendWith(f func(attempt int32, in activities.SendInput) (activities.SendOutput, error)) {
	h.env.OnActivity(a.Send, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.SendInput) (activities.SendOutput, error) {
		h.mu.Lock()
		h.sends = append(h.sends, in)
		h.sendAt = append(h.sendAt, h.env.Now().Sub(h.start))
		h.mu.Unlock()
		return f(activity.GetInfo(ctx).Attempt, in)
	})
}

// sentKeys are the keys of the mocked sends, one an attempt.
func (h *harness) sentKeys() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var keys []string
	for _, s := range h.sends {
		keys = append(keys, s.Request.Key)
	}
	return keys
}

// acceptsAs makes every send accepted, a new message id.
func (h *harness) acceptsAs(id string) {
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		return accepted(id, attempt, provider.Accepted), nil
	})
}

func accepted(id string, attempt int32, outcome provider.Outcome) activities.SendOutput {
	return activities.SendOutput{Result: provider.Result{Outcome: outcome, HTTPStatus: 202, MessageID: id, Status: provider.StatusAccepted}, Attempt: attempt}
}

func failAttempt(outcome provider.Outcome, attempt int32, mutate ...func(*provider.Result)) error {
	res := provider.Result{Outcome: outcome, Reason: "bird: " + string(outcome)}
	for _, m := range mutate {
		m(&res)
	}
	return activities.AttemptError(res, attempt, 5*time.Second)
}

// statuses mocks Status to walk through the given statuses, one per call,
// repeating the last.
func (h *harness) statuses(ss ...provider.Status) {
	var mu sync.Mutex
	i := 0
	h.env.OnActivity(a.Status, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.StatusInput) (provider.Message, error) {
		if err := activities.FirstWait(ctx, in); err != nil {
			return provider.Message{}, err
		}
		mu.Lock()
		defer mu.Unlock()
		s := ss[min(i, len(ss)-1)]
		i++
		return provider.Message{ID: in.MessageID, Status: s}, nil
	})
}

// statusByID mocks Status with a status per message id; a message it
// does not name is delivered.
func (h *harness) statusByID(by map[string]provider.Status) {
	h.env.OnActivity(a.Status, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.StatusInput) (provider.Message, error) {
		if err := activities.FirstWait(ctx, in); err != nil {
			return provider.Message{}, err
		}
		s, ok := by[in.MessageID]
		if !ok {
			s = provider.StatusDelivered
		}
		return provider.Message{ID: in.MessageID, Status: s}, nil
	})
}

// lookups records the searches a mocked Reconcile answered: when each
// began, since the run started, and what it asked.
type lookups struct {
	mu    sync.Mutex
	at    []time.Duration
	calls []activities.ReconcileInput
}

// searchesAt counts the searches at provider p (its canonical name).
func (l *lookups) searchesAt(p string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, c := range l.calls {
		if canonical(c.Provider) == p {
			n++
		}
	}
	return n
}

// reconcileSlow mocks Reconcile: search n (from 1), begun since after the
// run's start, takes delay(n, since) on the workflow clock (no time when
// delay is nil), as a provider that hangs, and then answers f(n, since,
// in). A run's searches never overlap; delay and f are called one search
// at a time. (The test environment makes an activity slow with
// OnActivity(...).After(d) or .AfterFn(f), d on the workflow clock, not
// real time.)
func (h *harness) reconcileSlow(delay func(n int, since time.Duration) time.Duration, f func(n int, since time.Duration, in activities.ReconcileInput) (activities.ReconcileOutput, error)) *lookups {
	l := &lookups{}
	n := 0
	var since time.Duration
	h.env.OnActivity(a.Reconcile, mock.Anything, mock.Anything).AfterFn(func() time.Duration {
		l.mu.Lock()
		defer l.mu.Unlock()
		n, since = n+1, h.env.Now().Sub(h.start)
		if delay == nil {
			return 0
		}
		return delay(n, since)
	}).Return(func(_ context.Context, in activities.ReconcileInput) (activities.ReconcileOutput, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.at = append(l.at, since)
		l.calls = append(l.calls, in)
		return f(n, since, in)
	})
	return l
}

// reconcileWith mocks Reconcile with a function of the search's time
// since the run started.
func (h *harness) reconcileWith(f func(since time.Duration, in activities.ReconcileInput) (activities.ReconcileOutput, error)) *lookups {
	return h.reconcileSlow(nil, func(_ int, since time.Duration, in activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return f(since, in)
	})
}

// reconcileReturns answers the searches with outs in turn, repeating the
// last.
func (h *harness) reconcileReturns(outs ...activities.ReconcileOutput) *lookups {
	return h.reconcileSlow(nil, func(n int, _ time.Duration, _ activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return outs[min(n-1, len(outs)-1)], nil
	})
}

// searchesFail makes every search fail with err.
func (h *harness) searchesFail(err error) *lookups {
	return h.reconcileWith(func(time.Duration, activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return activities.ReconcileOutput{}, err
	})
}

// searchDown is a search that fails (not retried, to keep a test short):
// the provider refuses it, as every request during a credential
// rotation.
func searchDown() error {
	return temporal.NewNonRetryableApplicationError("bird: 401 unauthorized", "ProviderUnauthorized", nil)
}

// reconcileByKey mocks Reconcile as a search by key that finds, under
// each key asked, the message byKey gives it.
func (h *harness) reconcileByKey(byKey map[string]provider.Message) *lookups {
	return h.reconcileWith(func(_ time.Duration, in activities.ReconcileInput) (activities.ReconcileOutput, error) {
		return foundByKey(in, byKey), nil
	})
}

// foundByKey is a search by key that finds, under each key asked, the
// message byKey gives it (its Reference the key).
func foundByKey(in activities.ReconcileInput, byKey map[string]provider.Message) activities.ReconcileOutput {
	out := activities.ReconcileOutput{Searched: true, ByKey: true}
	for _, k := range in.Keys {
		if m, ok := byKey[k]; ok {
			m.Reference = k
			out.Messages = append(out.Messages, m)
		}
	}
	return out
}

// signal sends a person's decision after a while. A payload that names no
// event gets what smsctl and the starter give every decision: the event's
// key and an id of its own (decisions_test.go sends them without).
func (h *harness) signal(after time.Duration, name string, payload any) {
	switch p := payload.(type) {
	case map[string]string:
		if _, ok := p["key"]; !ok {
			p["key"], p["id"] = key, nextDecisionID()
		}
	case map[string]any:
		if _, ok := p["key"]; !ok {
			p["key"], p["id"] = key, nextDecisionID()
		}
	}
	h.env.RegisterDelayedCallback(func() { h.env.SignalWorkflow(name, payload) }, after)
}

var decisionIDs atomic.Int64

func nextDecisionID() string { return fmt.Sprintf("decision-%d", decisionIDs.Add(1)) }

// bound gives a decision sent by update the event's key and an id of its own.
func bound(d contract.Decision) contract.Decision {
	d.Key, d.ID = key, nextDecisionID()
	return d
}

func (h *harness) run() { h.runWithFallback("") }

// runWithFallback runs the event with a fallback provider ("": none).
func (h *harness) runWithFallback(fallback string) {
	in := input
	in.Fallback = fallback
	h.env.ExecuteWorkflow(contract.WorkflowName, in)
	require.True(h.t, h.env.IsWorkflowCompleted())
	h.query() // every entry of the run's timeline has a kind of the closed set
}

// result returns the run's Result whether it completed, failed or was cancelled.
func (h *harness) result() (contract.Result, error) {
	var res contract.Result
	err := h.env.GetWorkflowError()
	if err == nil {
		require.NoError(h.t, h.env.GetWorkflowResult(&res))
		return res, nil
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		require.True(h.t, appErr.NonRetryable())
	}
	res, ok := contract.ResultFromError(err)
	require.True(h.t, ok, "unexpected workflow error %T: %v", err, err)
	return res, err
}

func (h *harness) query() contract.Status {
	v, err := h.env.QueryWorkflow(contract.QueryState)
	require.NoError(h.t, err)
	var s contract.Status
	require.NoError(h.t, v.Get(&s))
	// Every test that queries a run checks the kinds of its timeline;
	// Errorf, not FailNow: a query may come from a delayed callback.
	for _, e := range unknownKinds(s) {
		h.t.Errorf("timeline entry of kind %q, not one of contract.EntryKinds: %s", e.Kind, e.Text)
	}
	return s
}

func timelineHas(s contract.Status, sub string) bool {
	for _, e := range s.Timeline {
		if strings.Contains(e.Text, sub) {
			return true
		}
	}
	return false
}

// timelineTexts is the timeline's text, an entry a line.
func timelineTexts(s contract.Status) string {
	var out []string
	for _, e := range s.Timeline {
		out = append(out, e.Text)
	}
	return strings.Join(out, "\n")
}

// timelineHasKind reports whether the timeline has an entry of kind.
func timelineHasKind(s contract.Status, kind contract.EntryKind) bool {
	for _, e := range s.Timeline {
		if e.Kind == kind {
			return true
		}
	}
	return false
}

// unknownKinds are the entries of s whose kind is empty or not one of
// contract.EntryKinds.
func unknownKinds(s contract.Status) []contract.Entry {
	var bad []contract.Entry
	for _, e := range s.Timeline {
		if !e.Kind.Known() {
			bad = append(bad, e)
		}
	}
	return bad
}

func TestAcceptedThenDelivered(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.acceptsAs("m-1")
	h.statuses(provider.StatusSent, provider.StatusDelivered)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.Equal(t, []string{"m-1"}, res.MessageIDs)
	require.Equal(t, 1, res.Attempts)
	require.Zero(t, res.Replays)
	require.Equal(t, []string{key}, res.KeysUsed)
	require.Equal(t, "delivered", res.DeliveryStatus)
	require.Equal(t, "Delivered", h.settled.Outcome)
	require.Equal(t, "m-1", h.settled.MessageID)
	require.Len(t, h.sends, 1)
	require.Equal(t, h.policy.SendBudget(), h.sends[0].Budget)
	require.Equal(t, h.request(key).Body, h.sends[0].Request.Body)
	// Two polls: 10 s, then 20 s later.
	require.WithinDuration(t, h.start.Add(30*time.Second), h.env.Now(), time.Second)
	s := h.query()
	require.True(t, timelineHas(s, "message m-1 is sent"))
	require.True(t, timelineHas(s, "message m-1 is delivered"))
	require.Equal(t, "+31…78", s.To)
}

// The run tracks delivery with one Status activity whose retries are
// the polling schedule (10 s, then 20 s and 40 s later): a lookup that
// finds the status not final yet costs no workflow task and leaves no
// failure in the timeline. The first 10 s are the activity's first
// attempt, not a timer, unless the provider's lookups are paced, where
// that attempt would spend a dispatch of the rate-limited queue.
func TestDeliveryIsTrackedByOneActivityWhoseRetriesPoll(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		paced    bool
		attempts []int32
		timers   int
	}{
		{paced: false, attempts: []int32{1, 2, 3, 4}, timers: 0}, // the first attempt is the first wait
		{paced: true, attempts: []int32{1, 2, 3}, timers: 1},
	} {
		t.Run(fmt.Sprintf("paced=%v", tc.paced), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.policy.LookupsPaced = tc.paced
			h.prepared()
			h.acceptsAs("m-1")
			var mu sync.Mutex
			var attempts []int32
			timers := 0
			h.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
				if info.ActivityType.Name == "Status" {
					mu.Lock()
					defer mu.Unlock()
					attempts = append(attempts, info.Attempt)
				}
			})
			h.env.SetOnTimerScheduledListener(func(string, time.Duration) {
				mu.Lock()
				defer mu.Unlock()
				timers++
			})
			ss := []provider.Status{provider.StatusSent, provider.StatusSent, provider.StatusDelivered}
			var calls []activities.StatusInput
			h.env.OnActivity(a.Status, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.StatusInput) (provider.Message, error) {
				if err := activities.FirstWait(ctx, in); err != nil {
					return provider.Message{}, err
				}
				mu.Lock()
				defer mu.Unlock()
				calls = append(calls, in)
				s := ss[min(len(calls)-1, len(ss)-1)]
				if in.UntilFinal && !s.Final() {
					return provider.Message{}, temporal.NewApplicationErrorWithOptions("not final", activities.ErrNotFinal,
						temporal.ApplicationErrorOptions{Category: temporal.ApplicationErrorCategoryBenign})
				}
				return provider.Message{ID: in.MessageID, Status: s}, nil
			})
			h.run()
			res, err := h.result()
			require.NoError(t, err)
			require.Equal(t, contract.Delivered, res.State)
			require.Len(t, calls, 3, "three lookups ask the provider")
			for _, c := range calls {
				require.True(t, c.UntilFinal, "every lookup asks for a final status")
			}
			require.Equal(t, tc.attempts, attempts, "one activity, retried: not three")
			require.Equal(t, tc.timers, timers)
			require.WithinDuration(t, h.start.Add(70*time.Second), h.env.Now(), time.Second)
			s := h.query()
			require.True(t, timelineHas(s, "message m-1 is delivered"))
			require.False(t, timelineHas(s, "status lookup"), "a status not final yet is not a failure")
		})
	}
}

// A message whose status never becomes final: the run stops looking at
// the tracking limit and ends Accepted with the last status it saw, which
// the unfinished lookups carried.
func TestTrackingEndsAtTheLimitWithTheLastStatusSeen(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.policy.TrackingLimit = 3 * time.Minute
	h.prepared()
	h.acceptsAs("m-1")
	var mu sync.Mutex
	lookups := 0
	h.env.OnActivity(a.Status, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.StatusInput) (provider.Message, error) {
		if err := activities.FirstWait(ctx, in); err != nil {
			return provider.Message{}, err
		}
		mu.Lock()
		defer mu.Unlock()
		lookups++
		m := provider.Message{ID: in.MessageID, Status: provider.StatusSent}
		return provider.Message{}, temporal.NewApplicationErrorWithOptions("not final", activities.ErrNotFinal,
			temporal.ApplicationErrorOptions{Category: temporal.ApplicationErrorCategoryBenign, Details: []any{m}})
	})
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	// A closed run that could not confirm delivery is Unconfirmed, a
	// state of its own: Accepted is only ever an open run.
	require.Equal(t, contract.Unconfirmed, res.State)
	require.Contains(t, h.query().Reason, "delivery not confirmed within 3m0s (last status sent)")
	require.True(t, timelineHas(h.query(), "message m-1 is sent"))
	require.Equal(t, "Unconfirmed", h.settled.Outcome)
	require.GreaterOrEqual(t, lookups, 3)
	require.WithinDuration(t, h.start.Add(3*time.Minute), h.env.Now(), 30*time.Second)
}

// A ledger step whose local tries fail with an error a retry could fix
// (this worker holds another ledger) runs again as an activity, which
// any worker of the queue can take: the run goes on.
func TestALedgerStepThatFailsLocallyRunsAsAnActivity(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var mu sync.Mutex
	tries := 0
	h.env.OnActivity(a.Prepare, mock.Anything, mock.Anything).Return(func(context.Context, activities.PrepareInput) (activities.PrepareOutput, error) {
		mu.Lock()
		defer mu.Unlock()
		if tries++; tries <= 3 {
			return activities.PrepareOutput{}, temporal.NewApplicationError("this worker's ledger did not claim the event", activities.ErrWrongLedger)
		}
		return activities.PrepareOutput{Request: h.request(key), Policy: h.policy, Created: true}, nil
	})
	remote := map[string]int{}
	h.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) {
		mu.Lock()
		defer mu.Unlock()
		remote[info.ActivityType.Name]++
	})
	h.acceptsAs("m-1")
	h.statuses(provider.StatusDelivered)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.Equal(t, 4, tries, "three local tries, then the activity")
	require.Equal(t, 1, remote["Prepare"])
	require.Zero(t, remote["Settle"], "Settle succeeded locally")
	require.True(t, timelineHas(h.query(), "Prepare did not complete in the run's workflow task"))
}

func TestRetriesWhatIsSafeWithTheSameRequest(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		switch attempt {
		case 1:
			return activities.SendOutput{}, failAttempt(provider.NotExecuted, attempt)
		case 2:
			return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
		case 3:
			return activities.SendOutput{}, failAttempt(provider.InProgress, attempt)
		case 4:
			return activities.SendOutput{}, failAttempt(provider.RateLimited, attempt, func(r *provider.Result) { r.RetryAfter = 42 * time.Second })
		}
		return accepted("m-1", attempt, provider.Replayed), nil
	})
	h.statuses(provider.StatusDelivered)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.Equal(t, 5, res.Attempts)
	require.Equal(t, 1, res.Replays)
	require.Len(t, h.sends, 5)
	for _, s := range h.sends {
		require.Equal(t, h.sends[0].Request, s.Request, "the same key and bytes on every attempt")
	}
	// Backoff 1 s, 2 s; then the in-progress delay (5 s); then Retry-After (42 s).
	gaps := []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 42 * time.Second}
	for i, want := range gaps {
		require.InDelta(t, want.Seconds(), (h.sendAt[i+1] - h.sendAt[i]).Seconds(), 0.5, "gap %d", i)
	}
}

func TestRejectedIsNeverRetried(t *testing.T) {
	t.Parallel()
	for name, mutate := range map[string]func(*provider.Result){
		"bad request": func(r *provider.Result) { r.Reason, r.HTTPStatus = "bird: 400: bad number", 400 },
		"key conflict": func(r *provider.Result) {
			r.KeyConflict, r.Reason, r.Code = true, "bird: 409 E01005 IdempotencyKeyReuse", "E01005"
		},
		"sendy no cred": func(r *provider.Result) { r.Reason, r.HTTPStatus = "sendy: 402 no credit left", 402 },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.prepared()
			h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
				return activities.SendOutput{}, failAttempt(provider.Rejected, attempt, mutate)
			})
			h.run()
			res, err := h.result()
			require.Error(t, err)
			require.Equal(t, contract.Failed, res.State)
			var want provider.Result
			mutate(&want)
			require.Contains(t, res.Reason, want.Reason)
			require.Len(t, h.sends, 1, "no retry")
			require.Equal(t, 1, res.Attempts)
			require.Equal(t, "Failed", h.settled.Outcome)
		})
	}
}

func TestWindowClosesThenReconcileThenNoDecision(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		return activities.SendOutput{}, failAttempt(provider.Unknown, attempt, func(r *provider.Result) { r.Reason = "bird: 502 bad gateway" })
	})
	calls := h.reconcileReturns(activities.ReconcileOutput{Searched: true, How: "searched 0 bird messages"})
	var atAwaiting contract.Status
	h.env.RegisterDelayedCallback(func() { atAwaiting = h.query() }, 3*time.Hour)
	h.run()
	res, err := h.result()
	require.Error(t, err)
	require.Equal(t, contract.Failed, res.State)
	require.Contains(t, res.Reason, "no decision within 72h0m0s")
	require.Contains(t, res.Reason, "not found")

	last := h.sendAt[len(h.sendAt)-1]
	require.Less(t, last, h.policy.SendBudget(), "no attempt starts after the window minus the margin")
	require.Greater(t, last, h.policy.SendBudget()-h.policy.MaxBackoff-time.Minute, "retries go on until then")
	require.Len(t, calls.calls, 1)
	require.Equal(t, []string{key}, calls.calls[0].Keys)

	require.Equal(t, contract.AwaitingDecision, atAwaiting.State)
	require.True(t, timelineHas(atAwaiting, "ran out with the outcome unknown; last answer: bird: 502 bad gateway"))
	require.WithinDuration(t, h.start.Add(h.policy.SendBudget()+h.policy.DecisionDeadline), atAwaiting.DecisionDeadline, 10*time.Minute)
	require.WithinDuration(t, atAwaiting.DecisionDeadline, h.env.Now(), time.Minute, "the deadline ended the run")
}

func TestReconcileFindsTheMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	res := h.unknownThenFound()
	require.Equal(t, []string{"m-7"}, res.MessageIDs)
}

func TestResendAfterTheWindowReconcilesThenSendsUnderTheResendKey(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		if in.Request.Key == key {
			return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
		}
		return accepted("m-2", attempt, provider.Accepted), nil
	})
	calls := h.reconcileReturns(activities.ReconcileOutput{Searched: true})
	h.env.OnActivity(a.Plan, mock.Anything, mock.Anything).Return(func(_ context.Context, in activities.PlanInput) (provider.Request, error) {
		require.Equal(t, key+"~resend-1", in.SendKey)
		return h.request(in.SendKey), nil
	})
	h.statuses(provider.StatusDelivered)
	h.signal(5*time.Hour, contract.SignalResend, map[string]string{"reason": "customer says nothing arrived", "by": "alice"})
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.Equal(t, []string{key, key + "~resend-1"}, res.KeysUsed)
	require.Equal(t, []string{key + "~resend-1"}, res.ResendKeys)
	require.Equal(t, contract.BasisReconciled, res.Resends[0].Basis)
	require.Equal(t, []string{"m-2"}, res.MessageIDs)
	require.Len(t, calls.calls, 2, "reconciled when the window closed and again before the resend")
	require.Equal(t, []string{key}, calls.calls[1].Keys)
	lastSend := h.sends[len(h.sends)-1]
	require.Equal(t, key+"~resend-1", lastSend.Request.Key)
	s := h.query()
	require.True(t, timelineHas(s, "resend decided by alice: customer says nothing arrived"))
}

func TestResendFindsTheMessageAfterAllAndDoesNotSend(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
	})
	h.reconcileReturns(
		activities.ReconcileOutput{Searched: true},
		activities.ReconcileOutput{Searched: true, Messages: []provider.Message{{ID: "m-late", Reference: key, Status: provider.StatusDelivered}}},
	)
	h.statuses(provider.StatusDelivered)
	h.signal(4*time.Hour, contract.SignalResend, map[string]string{"reason": "retry", "by": "bob"})
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.Equal(t, []string{"m-late"}, res.MessageIDs)
	require.Empty(t, res.ResendKeys, "nothing was resent")
	for _, s := range h.sends {
		require.Equal(t, key, s.Request.Key)
	}
}

func TestFailedDeliveryThenResendInsideTheWindowSkipsReconcile(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.sendWith(func(attempt int32, in activities.SendInput) (activities.SendOutput, error) {
		if in.Request.Key == key {
			return accepted("m-1", attempt, provider.Accepted), nil
		}
		return accepted("m-2", attempt, provider.Accepted), nil
	})
	h.statusByID(map[string]provider.Status{"m-1": provider.StatusFailed, "m-2": provider.StatusDelivered})
	h.env.OnActivity(a.Plan, mock.Anything, mock.Anything).Return(h.request(key+"~resend-1"), nil)
	h.signal(time.Minute, contract.SignalResend, map[string]string{"reason": "handset was off", "by": "carol"})
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.Equal(t, []string{"m-1", "m-2"}, res.MessageIDs)
	require.Equal(t, []string{key + "~resend-1"}, res.ResendKeys)
	h.env.AssertNotCalled(t, "Reconcile", mock.Anything, mock.Anything)
}

func TestCancelEndsTheRunAsCancelled(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
	})
	h.reconcileReturns(activities.ReconcileOutput{Searched: true})
	h.signal(4*time.Hour, contract.SignalCancel, map[string]string{"reason": "order cancelled", "by": "dave"})
	h.run()
	res, err := h.result()
	var canceled *temporal.CanceledError
	require.True(t, errors.As(err, &canceled))
	require.Equal(t, contract.Cancelled, res.State)
	require.Equal(t, "cancelled by dave: order cancelled", res.Reason)
	require.Equal(t, "Cancelled", h.settled.Outcome)
	for _, s := range h.sends {
		require.Equal(t, key, s.Request.Key, "nothing new was sent")
	}
}

func TestDecisionsThatDoNotFitAreRefusedVisibly(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.acceptsAs("m-1")
	h.statuses(provider.StatusSent, provider.StatusSent, provider.StatusDelivered)
	h.signal(5*time.Second, contract.SignalResend, map[string]string{"reason": "double click", "by": "erin"})
	h.signal(6*time.Second, contract.SignalCancel, "not an object")
	h.signal(7*time.Second, contract.SignalCancel, map[string]string{"reason": "no name"})
	var updateErr error
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(contract.UpdateDecide, "u1", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { updateErr = err },
			OnAccept: func() { t.Error("the update must be refused") },
		}, bound(contract.Decision{Action: contract.ActionCancel, Reason: "x", By: "frank"}))
	}, 8*time.Second)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State, "the run went on as if nothing happened")
	require.ErrorContains(t, updateErr, "not awaiting a decision")
	s := h.query()
	require.True(t, timelineHas(s, "refused a resend signal from erin: refused: the run is Accepted, not awaiting a decision"))
	require.True(t, timelineHas(s, `refused a cancel signal from someone: the signal payload "not an object" is not {"reason": "...", "by": "..."}`))
	require.True(t, timelineHas(s, `refused a cancel signal from someone: a decision needs "by"`))
}

func TestUpdateDecidesSynchronously(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
	})
	h.reconcileReturns(activities.ReconcileOutput{Searched: true})
	var ack contract.DecisionAck
	var badErr error
	h.env.RegisterDelayedCallback(func() {
		h.env.UpdateWorkflow(contract.UpdateDecide, "bad", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { badErr = err }, OnAccept: func() {}, OnComplete: func(any, error) {},
		}, bound(contract.Decision{Action: "delete", Reason: "x", By: "y"}))
		h.env.UpdateWorkflow(contract.UpdateDecide, "good", &testsuite.TestUpdateCallback{
			OnReject: func(err error) { t.Errorf("refused: %v", err) }, OnAccept: func() {},
			OnComplete: func(v any, err error) {
				require.NoError(t, err)
				ack = v.(contract.DecisionAck)
			},
		}, bound(contract.Decision{Action: contract.ActionCancel, Reason: "duplicate order", By: "gina"}))
	}, 4*time.Hour)
	h.run()
	res, _ := h.result()
	require.Equal(t, contract.Cancelled, res.State)
	require.ErrorContains(t, badErr, `action "delete" is not known`)
	require.Contains(t, ack.Message, "cancel accepted")
}

func TestDuplicateOfASettledEventSendsNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	settledAt := h.start.Add(-40 * 24 * time.Hour)
	h.env.OnActivity(a.Prepare, mock.Anything, mock.Anything).Return(activities.PrepareOutput{
		Request: h.request(key), Policy: h.policy,
		Settled: &ledger.Event{Key: key, Outcome: "Delivered", MessageID: "m-old", SettledAt: settledAt},
	}, nil)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Duplicate, res.State)
	require.Contains(t, res.Reason, "already sent as message m-old")
	require.Equal(t, []string{"m-old"}, res.MessageIDs)
	require.Empty(t, h.sends)
	require.Nil(t, h.settled, "the ledger keeps the original outcome")
}

func TestInvalidOrConflictingEventFailsBeforeSending(t *testing.T) {
	t.Parallel()
	t.Run("invalid", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.env.OnActivity(a.Prepare, mock.Anything, mock.Anything).Return(activities.PrepareOutput{},
			temporal.NewNonRetryableApplicationError(`recipient "0612345678" has no country code; write it in international form`, activities.ErrInvalidRequest, nil))
		h.run()
		res, err := h.result()
		require.Error(t, err)
		require.Equal(t, contract.Failed, res.State)
		require.Contains(t, res.Reason, "has no country code")
		require.Empty(t, h.sends)
		require.Nil(t, h.settled)
	})
	t.Run("conflict", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.env.OnActivity(a.Prepare, mock.Anything, mock.Anything).Return(activities.PrepareOutput{
			Request: h.request(key), Policy: h.policy, Conflict: "the key is already claimed by a message with another text",
		}, nil)
		h.run()
		res, err := h.result()
		require.Error(t, err)
		require.Contains(t, res.Reason, "another text")
		require.Empty(t, h.sends)
		require.Nil(t, h.settled, "the other message's record is left alone")
	})
	t.Run("workflow id is not the key", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "some-uuid"})
		h.run()
		res, err := h.result()
		require.Error(t, err)
		require.Contains(t, res.Reason, `the workflow id "some-uuid" is not the event key`)
		require.Empty(t, h.sends)
	})
}

func TestUncertainAttemptsLeadToADuplicateSearch(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		if attempt == 1 {
			return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
		}
		out := accepted("m-2", attempt, provider.Accepted)
		out.Uncertain = true
		return out, nil
	})
	h.reconcileReturns(activities.ReconcileOutput{Searched: true, Messages: []provider.Message{
		{ID: "m-1", Reference: key, Status: provider.StatusAccepted},
		{ID: "m-2", Reference: key, Status: provider.StatusAccepted},
	}})
	h.statuses(provider.StatusDelivered)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.True(t, res.DuplicateSend)
	require.ElementsMatch(t, []string{"m-1", "m-2"}, res.MessageIDs)
	require.True(t, timelineHas(h.query(), "proven duplicate send: 2 accepted message ids for key "+key))
}

func TestTrackingLimitEndsUnconfirmed(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.acceptsAs("m-1")
	h.statuses(provider.StatusSent)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Unconfirmed, res.State)
	require.True(t, res.State.Final())
	require.Contains(t, res.Reason, "delivery not confirmed within 24h0m0s")
	require.Equal(t, "Unconfirmed", h.settled.Outcome)
	require.WithinDuration(t, h.start.Add(24*time.Hour), h.env.Now(), time.Minute)
}

func TestResumedEventPastItsWindowReconcilesFirst(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.env.OnActivity(a.Prepare, mock.Anything, mock.Anything).Return(activities.PrepareOutput{
		Request: h.request(key), Policy: h.policy, FirstAttemptAt: h.start.Add(-5 * time.Hour),
	}, nil)
	h.reconcileReturns(activities.ReconcileOutput{Searched: true, Messages: []provider.Message{{ID: "m-1", Reference: key, Status: provider.StatusDelivered}}})
	h.statuses(provider.StatusDelivered)
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.Empty(t, h.sends, "an earlier run's window closed: nothing is sent before reconciling")
}

func TestTemporalCancellationIsADecision(t *testing.T) {
	t.Parallel()
	t.Run("while awaiting", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.prepared()
		h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
			return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
		})
		h.reconcileReturns(activities.ReconcileOutput{Searched: true})
		h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 4*time.Hour)
		h.run()
		res, _ := h.result()
		require.Equal(t, contract.Cancelled, res.State)
		require.Contains(t, res.Reason, "Temporal cancellation request")
	})
	t.Run("while tracking", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		h.prepared()
		h.acceptsAs("m-1")
		h.statuses(provider.StatusSent, provider.StatusDelivered)
		h.env.RegisterDelayedCallback(h.env.CancelWorkflow, 5*time.Second)
		h.run()
		res, err := h.result()
		require.NoError(t, err)
		require.Equal(t, contract.Delivered, res.State, "a sent SMS cannot be cancelled; the run follows it to the end")
		require.True(t, timelineHasKind(h.query(), contract.KindDecisionRefused), "the cancellation request was refused")
	})
}

// The message failed, a resend is decided after the window, and
// reconciliation finds that a message of the event is alive after all:
// the run follows the live message, not the failed one, and sends nothing.
func TestResendAfterFailureFollowsTheLiveMessageFound(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.acceptsAs("m-1")
	var mu sync.Mutex
	var tracked []string
	h.env.OnActivity(a.Status, mock.Anything, mock.Anything).Return(func(ctx context.Context, in activities.StatusInput) (provider.Message, error) {
		if err := activities.FirstWait(ctx, in); err != nil {
			return provider.Message{}, err
		}
		mu.Lock()
		defer mu.Unlock()
		tracked = append(tracked, in.MessageID)
		if in.MessageID == "m-1" {
			return provider.Message{ID: "m-1", Status: provider.StatusFailed}, nil
		}
		return provider.Message{ID: in.MessageID, Status: provider.StatusDelivered}, nil
	})
	h.reconcileReturns(activities.ReconcileOutput{Searched: true, Messages: []provider.Message{
		{ID: "m-1", Reference: key, Status: provider.StatusFailed},
		{ID: "m-9", Reference: key, Status: provider.StatusSent},
	}})
	h.signal(4*time.Hour, contract.SignalResend, map[string]string{"reason": "try again", "by": "ivy"})
	h.run()
	res, err := h.result()
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.Equal(t, "m-9", tracked[len(tracked)-1], "the live message is followed")
	require.Empty(t, res.ResendKeys)
	require.Equal(t, "m-9", h.settled.MessageID)
	require.Len(t, h.sends, 1)
}

// A run calls the provider from the provider's one task queue, where
// the workers' fleet-wide rate limit applies, searches before sends and
// sends before status lookups; the ledger steps are local activities:
// they run inside the run's workflow tasks, on no task queue of their
// own.
func TestProviderActivitiesRunOnTheProviderQueue(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var mu sync.Mutex
	queues, local := map[string]map[string]bool{}, map[string]map[string]bool{}
	priorities := map[string]map[int]bool{}
	record := func(into map[string]map[string]bool, info *activity.Info) {
		mu.Lock()
		defer mu.Unlock()
		if into[info.ActivityType.Name] == nil {
			into[info.ActivityType.Name] = map[string]bool{}
		}
		into[info.ActivityType.Name][info.TaskQueue] = true
	}
	// The test environment gives an activity no priority: read the
	// options the run schedules it with.
	h.env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&scheduled{record: func(ctx workflow.Context, name string, _ []any) {
		o := workflow.GetActivityOptions(ctx)
		mu.Lock()
		defer mu.Unlock()
		if priorities[name] == nil {
			priorities[name] = map[int]bool{}
		}
		priorities[name][o.Priority.PriorityKey] = true
	}}}})
	h.env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, _ converter.EncodedValues) { record(queues, info) })
	h.env.SetOnLocalActivityStartedListener(func(info *activity.Info, _ context.Context, _ []any) { record(local, info) })
	h.unknownThenFound()
	for _, step := range []string{"Prepare", "Plan", "Settle"} {
		require.Empty(t, queues[step], step+" is a local activity, not a task of its own")
	}
	require.NotEmpty(t, local["Settle"])
	runQueue := ""
	for q := range local["Prepare"] {
		runQueue = q
	}
	require.NotEmpty(t, runQueue)
	require.Equal(t, "sms-bird", contract.ProviderQueue(contract.TaskQueue, "bird"))
	q := contract.ProviderQueue(runQueue, "bird")
	require.Equal(t, map[int]bool{contract.PrioritySend: true}, priorities["Send"])
	require.Equal(t, map[int]bool{contract.PrioritySearch: true}, priorities["Reconcile"])
	require.Equal(t, map[int]bool{contract.PriorityLookup: true}, priorities["Status"])
	require.Less(t, contract.PrioritySearch, contract.PrioritySend, "searches go first")
	require.Less(t, contract.PrioritySend, contract.PriorityLookup, "sends go before status lookups")
	require.Equal(t, map[string]bool{q: true}, queues["Send"])
	require.Equal(t, map[string]bool{q: true}, queues["Reconcile"])
	require.Equal(t, map[string]bool{q: true}, queues["Status"])
	for _, other := range []string{"Prepare", "Plan", "Settle"} {
		for lq := range local[other] {
			require.NotEqual(t, q, lq, other+" does not call the provider")
		}
	}
}

// scheduled is a worker interceptor that passes each activity a run
// schedules to record, with the context that holds its options.
type scheduled struct {
	interceptor.WorkerInterceptorBase
	record func(ctx workflow.Context, activityType string, args []any)
}

func (s *scheduled) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &scheduledInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, record: s.record}
}

type scheduledInbound struct {
	interceptor.WorkflowInboundInterceptorBase
	record func(workflow.Context, string, []any)
}

func (i *scheduledInbound) Init(out interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&scheduledOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: out}, record: i.record})
}

type scheduledOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
	record func(workflow.Context, string, []any)
}

func (o *scheduledOutbound) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	o.record(ctx, activityType, args)
	return o.Next.ExecuteActivity(ctx, activityType, args...)
}

// unknownThenFound runs the path where every attempt ends unknown and
// the search after the window finds the message m-7, delivered.
func (h *harness) unknownThenFound() contract.Result {
	h.t.Helper()
	h.prepared()
	h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
		return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
	})
	h.reconcileReturns(activities.ReconcileOutput{Searched: true, Messages: []provider.Message{{ID: "m-7", Reference: key, Status: provider.StatusSent}}})
	h.statuses(provider.StatusDelivered)
	h.run()
	res, err := h.result()
	require.NoError(h.t, err)
	require.Equal(h.t, contract.Delivered, res.State)
	return res
}
