package activities

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/provider/bird"
	"github.com/acme/smsorch/provider/pace/pacetest"
	"github.com/acme/smsorch/provider/sendy"
)

type bundle struct {
	acts *Activities
	sim  *simulator.Server
	env  *testsuite.TestActivityEnvironment
	led  ledger.Ledger
	url  string // the simulator's
}

func setup(t *testing.T) bundle {
	t.Helper()
	sim, err := simulator.New(simulator.Config{Seed: 3})
	require.NoError(t, err)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	b, err := bird.New(bird.Config{BaseURL: srv.URL, AccessKey: simulator.DefaultBirdAccessKey, WorkspaceID: "ws", ChannelID: "ch", Timeout: time.Second})
	require.NoError(t, err)
	s, err := sendy.New(sendy.Config{BaseURL: srv.URL, Token: simulator.DefaultSendyToken, Sender: "MyShop", Timeout: time.Second})
	require.NoError(t, err)
	led, err := ledger.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "ledger.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = led.Close() })
	led.SetClock(sim.Now)
	acts := &Activities{
		Providers: map[provider.Name]provider.Client{provider.Bird: b, provider.Sendy: s},
		Ledger:    led,
		Now:       sim.Now, // the simulator's clock, so moving it moves ours
	}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	return bundle{acts, sim, env, led, srv.URL}
}

func prepare(t *testing.T, b bundle, in PrepareInput) (PrepareOutput, error) {
	t.Helper()
	v, err := b.env.ExecuteActivity(b.acts.Prepare, in)
	if err != nil {
		return PrepareOutput{}, err
	}
	var out PrepareOutput
	require.NoError(t, v.Get(&out))
	return out, nil
}

func send(t *testing.T, b bundle, in SendInput) (SendOutput, error) {
	t.Helper()
	v, err := b.env.ExecuteActivity(b.acts.Send, in)
	if err != nil {
		return SendOutput{}, err
	}
	var out SendOutput
	require.NoError(t, v.Get(&out))
	return out, nil
}

var event = PrepareInput{Key: "order-58213-shipped", Provider: "bird", To: "+31 6 1234 5678", Text: "Order 58213 has shipped."}

func TestPrepareRefusesWhatCannotBeSent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for name, tc := range map[string]struct {
		mutate func(*PrepareInput)
		want   string
	}{
		"bad key":       {func(in *PrepareInput) { in.Key = "order 58213" }, "printable ASCII without spaces"},
		"phone key":     {func(in *PrepareInput) { in.Key = "phone-0612345678" }, "names the person, not the message"},
		"recipient key": {func(in *PrepareInput) { in.Key = "sms-to-0612345678" }, "names the person"}, // passes Parse; CheckRecipient sees the recipient
		"no country":    {func(in *PrepareInput) { in.To = "0612345678" }, "has no country code"},
		"empty text":    {func(in *PrepareInput) { in.Text = " " }, "text is empty"},
		"provider":      {func(in *PrepareInput) { in.Provider = "twilio" }, `provider "twilio" is not known`},
		"bird sender":   {func(in *PrepareInput) { in.From = "MyShop" }, "Bird sends from the channel's own sender"},
	} {
		in := event
		tc.mutate(&in)
		_, err := prepare(t, b, in)
		var appErr *temporal.ApplicationError
		require.True(t, errors.As(err, &appErr), name)
		require.Equal(t, ErrInvalidRequest, appErr.Type(), name)
		require.True(t, appErr.NonRetryable(), name)
		require.ErrorContains(t, err, tc.want, name)
	}
	require.Empty(t, b.sim.Requests(simulator.Filter{}), "nothing reached the provider")
}

func TestPrepareWaitsForAMissingProviderConfig(t *testing.T) {
	t.Parallel()
	b := setup(t)
	delete(b.acts.Providers, provider.Sendy)
	in := event
	in.Provider = "sendy"
	_, err := prepare(t, b, in)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr))
	require.False(t, appErr.NonRetryable(), "a config fix and a restart let the run go on")
	require.ErrorContains(t, err, "no sendy client configured")
}

func TestPrepareClaimsOncePlansOnceAndSpotsConflicts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first, err := prepare(t, b, event)
	require.NoError(t, err)
	require.True(t, first.Created)
	require.Equal(t, "+31612345678", first.Request.To, "normalised to E.164")
	require.Equal(t, DefaultPolicy(), first.Policy)
	require.Contains(t, string(first.Request.Body), `"reference":"order-58213-shipped"`)

	again, err := prepare(t, b, event)
	require.NoError(t, err)
	require.False(t, again.Created)
	require.Equal(t, first.Request.Body, again.Request.Body, "the same event plans the same bytes")

	other := event
	other.Text = "Order 58213 was cancelled."
	c, err := prepare(t, b, other)
	require.NoError(t, err)
	require.Contains(t, c.Conflict, "another text")

	_, err = b.led.Settle(context.Background(), event.Key, "Delivered", "delivered", "m-1", b.sim.Now())
	require.NoError(t, err)
	settled, err := prepare(t, b, event)
	require.NoError(t, err)
	require.NotNil(t, settled.Settled)
	require.Equal(t, "m-1", settled.Settled.MessageID)
}

func TestPrepareWarns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := event
	in.Key = "otp-8412-" + time.Now().Add(-time.Hour).Format("20060102") // not a timestamp
	in.To = "+972501234567"
	out, err := prepare(t, b, in)
	require.NoError(t, err)
	require.Len(t, out.Warnings, 1)
	require.Contains(t, out.Warnings[0], "outside the number ranges")
}

func TestSendRecordsEveryAttemptAndClassifies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, err := prepare(t, b, event)
	require.NoError(t, err)
	in := SendInput{EventKey: event.Key, Request: p.Request, Budget: p.Policy.SendBudget(), InProgressDelay: 5 * time.Second}

	require.NoError(t, b.sim.AddFault(simulator.Fault{Kind: simulator.RateLimit, Provider: "bird", Delay: simulator.Duration(9 * time.Second)}))
	_, err = send(t, b, in)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr))
	require.Equal(t, ErrRateLimited, appErr.Type())
	require.Equal(t, 9*time.Second, appErr.NextRetryDelay(), "Retry-After becomes the next retry delay")
	var failure SendFailure
	require.NoError(t, appErr.Details(&failure))
	require.Equal(t, provider.RateLimited, failure.Result.Outcome)

	out, err := send(t, b, in)
	require.NoError(t, err)
	require.Equal(t, provider.Accepted, out.Result.Outcome)

	out, err = send(t, b, in)
	require.NoError(t, err)
	require.Equal(t, provider.Replayed, out.Result.Outcome)

	rows, err := b.led.Attempts(context.Background(), event.Key)
	require.NoError(t, err)
	require.Len(t, rows, 1, "the activity environment runs every call as attempt 1 of one run: one row, last answer wins")
	require.Equal(t, string(provider.Replayed), rows[0].Outcome)
	require.True(t, rows[0].Replay)
	require.False(t, rows[0].Open())
}

func TestAttemptErrorTypes(t *testing.T) {
	t.Parallel()
	for outcome, want := range map[provider.Outcome]string{
		provider.NotExecuted: ErrNotExecuted,
		provider.InProgress:  ErrInProgress,
		provider.Unknown:     ErrUnknownOutcome,
		provider.RateLimited: ErrRateLimited,
		provider.Rejected:    ErrRejected,
	} {
		err := AttemptError(provider.Result{Outcome: outcome, Reason: "r", RetryAfter: 3 * time.Second}, 2, 5*time.Second)
		var appErr *temporal.ApplicationError
		require.True(t, errors.As(err, &appErr))
		require.Equal(t, want, appErr.Type(), outcome)
		require.Equal(t, outcome == provider.Rejected, appErr.NonRetryable(), outcome)
		if outcome == provider.Rejected {
			require.NotEqual(t, temporal.ApplicationErrorCategoryBenign, appErr.Category(), "a rejection is a failure")
		} else {
			require.Equal(t, temporal.ApplicationErrorCategoryBenign, appErr.Category(), "%s is retried: benign", outcome)
		}
		switch outcome {
		case provider.InProgress:
			require.Equal(t, 5*time.Second, appErr.NextRetryDelay())
		case provider.RateLimited, provider.NotExecuted, provider.Unknown:
			require.Equal(t, 3*time.Second, appErr.NextRetryDelay(), "Retry-After is honoured on %s", outcome)
		}
	}
	err := AttemptError(provider.Result{Outcome: provider.Rejected, KeyConflict: true}, 1, 0)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr))
	require.Equal(t, ErrKeyConflict, appErr.Type())
	require.True(t, appErr.NonRetryable())
}

func TestSendRefusesPastTheWindow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, err := prepare(t, b, event)
	require.NoError(t, err)
	in := SendInput{EventKey: event.Key, Request: p.Request, Budget: p.Policy.SendBudget()}
	require.NoError(t, b.sim.AddFault(simulator.Fault{Kind: simulator.Error5xx, Provider: "bird"}))
	_, err = send(t, b, in)
	require.Error(t, err)

	b.sim.Advance(p.Policy.SendBudget() + time.Minute)
	_, err = send(t, b, in)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr))
	require.Equal(t, ErrWindowClosed, appErr.Type())
	require.True(t, appErr.NonRetryable())
	require.Len(t, b.sim.Requests(simulator.Filter{Provider: "bird"}), 1, "nothing was sent past the window")
}

// hold moves the event to run, as a later run's claim does.
func hold(t *testing.T, b bundle, key, run string) {
	t.Helper()
	e, err := b.led.Event(context.Background(), key)
	require.NoError(t, err)
	e.RunID = run
	_, err = b.led.Claim(context.Background(), e)
	require.NoError(t, err)
}

func TestEarlierUncertain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := prepare(t, b, event)
	require.NoError(t, err)
	at := func(run string, n int, outcome provider.Outcome, ended bool) ledger.Attempt {
		hold(t, b, event.Key, run)
		row := ledger.Attempt{EventKey: event.Key, SendKey: event.Key, RunID: run, Number: n, StartedAt: time.Unix(int64(n), 0)}
		require.NoError(t, b.led.BeginAttempt(ctx, row))
		if ended {
			row.EndedAt, row.Outcome = row.StartedAt, string(outcome)
			require.NoError(t, b.led.EndAttempt(ctx, row))
		}
		return row
	}
	at("r", 1, provider.NotExecuted, true)
	this := at("r", 2, provider.Accepted, true)
	require.True(t, b.acts.earlierUncertain(ctx, event.Key, this).IsZero(), "a 503 E01033 is certain: not executed")
	at("r", 3, provider.Unknown, true)
	require.Equal(t, time.Unix(3, 0).UTC(), b.acts.earlierUncertain(ctx, event.Key, at("r", 4, provider.Accepted, true)).UTC())

	b = setup(t)
	_, err = prepare(t, b, event)
	require.NoError(t, err)
	at("r", 1, "", false) // cut off by a crash
	require.Equal(t, time.Unix(1, 0).UTC(), b.acts.earlierUncertain(ctx, event.Key, at("r", 2, provider.Accepted, true)).UTC())

	// An earlier run's uncertain attempt counts although this run's
	// accepted attempt is its first.
	b = setup(t)
	_, err = prepare(t, b, event)
	require.NoError(t, err)
	at("run-1", 5, provider.InProgress, true)
	require.Equal(t, time.Unix(5, 0).UTC(), b.acts.earlierUncertain(ctx, event.Key, at("run-2", 1, provider.Accepted, true)).UTC())
}

// A run that resumes an event after an earlier run made attempts (hung
// ones, resends) learns every key and the latest uncertain attempt; a
// send whose first activity attempt is accepted still reports an earlier
// run's uncertain attempt.
func TestResumeLoadsEveryKeyAndEarlierRunsCount(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p, err := prepare(t, b, event)
	require.NoError(t, err)
	t0 := b.sim.Now().Truncate(time.Microsecond) // the ledger keeps microseconds
	rows := []ledger.Attempt{
		{EventKey: event.Key, SendKey: event.Key, RunID: "run-1", Number: 1, StartedAt: t0, EndedAt: t0.Add(time.Second), Outcome: string(provider.Unknown)},
		{EventKey: event.Key, SendKey: event.Key + "~resend-1", RunID: "run-1", Number: 1, StartedAt: t0.Add(time.Hour), EndedAt: t0.Add(time.Hour), Outcome: string(provider.Accepted), MessageID: "m-2"},
		{EventKey: event.Key, SendKey: event.Key + "~resend-2", RunID: "run-1", Number: 1, StartedAt: t0.Add(2 * time.Hour)}, // cut off
	}
	for _, r := range rows {
		hold(t, b, event.Key, r.RunID)
		require.NoError(t, b.led.BeginAttempt(ctx, r))
		if !r.EndedAt.IsZero() {
			require.NoError(t, b.led.EndAttempt(ctx, r))
		}
	}
	again, err := prepare(t, b, event)
	require.NoError(t, err)
	require.False(t, again.Created)
	var got []string
	for _, k := range again.SendKeys {
		got = append(got, k.Key)
	}
	require.Equal(t, []string{event.Key, event.Key + "~resend-1", event.Key + "~resend-2"}, got)
	require.Equal(t, t0.Add(2*time.Hour).UTC(), again.LastUncertainAt.UTC(), "the cut-off resend attempt is the latest uncertain one")

	// run-2's first activity attempt is accepted; run-1's unknown attempt
	// under the same key makes the acceptance uncertain.
	out, err := send(t, b, SendInput{EventKey: event.Key, Request: p.Request, Budget: time.Hour})
	require.NoError(t, err)
	require.EqualValues(t, 1, out.Attempt)
	require.True(t, out.Uncertain)
	require.Equal(t, t0.UTC(), out.UncertainSince.UTC())
}

// A resend key given as an event key is refused before anything is claimed.
func TestPrepareRefusesAResendKeyAsEventKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := event
	in.Key = event.Key + "~resend-1"
	_, err := prepare(t, b, in)
	require.ErrorContains(t, err, "not an event key")
	_, err = b.led.Event(context.Background(), in.Key)
	require.ErrorIs(t, err, ledger.ErrNotFound)
}

func runReconcile(t *testing.T, b bundle, in ReconcileInput) ReconcileOutput {
	t.Helper()
	v, err := b.env.ExecuteActivity(b.acts.Reconcile, in)
	require.NoError(t, err)
	var out ReconcileOutput
	require.NoError(t, v.Get(&out))
	return out
}

func TestReconcileSearchesBirdByKeyAndSendyByID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	start := b.sim.Now()
	p, err := prepare(t, b, event)
	require.NoError(t, err)
	require.NoError(t, b.sim.AddFault(simulator.Fault{Kind: simulator.Unstored, Provider: "bird"}))
	in := SendInput{EventKey: event.Key, Request: p.Request, Budget: p.Policy.SendBudget()}
	_, err = send(t, b, in)
	require.Error(t, err)
	_, err = send(t, b, in)
	require.NoError(t, err)

	found := runReconcile(t, b, ReconcileInput{EventKey: event.Key, Provider: "bird", Keys: []string{event.Key}, Since: start})
	require.True(t, found.Searched)
	require.Len(t, found.Messages, 2, "both messages of the documented duplicate path")
	require.Contains(t, found.How, "by key")

	none := runReconcile(t, b, ReconcileInput{EventKey: event.Key, Provider: "bird", Keys: []string{event.Key + "~resend-1"}, Since: start})
	require.True(t, none.Searched)
	require.Empty(t, none.Messages)

	sendyEvent := PrepareInput{Key: "order-7-shipped", Provider: "sendy", To: "+972502345678", Text: "Order 7 has shipped."}
	sp, err := prepare(t, b, sendyEvent)
	require.NoError(t, err)
	blind := runReconcile(t, b, ReconcileInput{EventKey: sendyEvent.Key, Provider: "sendy", Keys: []string{sendyEvent.Key}, Since: start})
	require.False(t, blind.Searched, "Sendy cannot be searched without an id")
	require.Contains(t, blind.How, "no list endpoint")

	_, err = send(t, b, SendInput{EventKey: sendyEvent.Key, Request: sp.Request, Budget: sp.Policy.SendBudget()})
	require.NoError(t, err)
	byID := runReconcile(t, b, ReconcileInput{EventKey: sendyEvent.Key, Provider: "sendy", Keys: []string{sendyEvent.Key}, Since: start})
	require.True(t, byID.Searched)
	require.Len(t, byID.Messages, 1, "the id recorded in the ledger is looked up")

	// What goes into the run's history carries no recipient and no text.
	for _, m := range append(found.Messages, byID.Messages...) {
		require.Empty(t, m.To, m.ID)
		require.Empty(t, m.Text, m.ID)
		require.NotEmpty(t, m.Status, m.ID)
	}
	v, err := b.env.ExecuteActivity(b.acts.Status, StatusInput{Provider: "sendy", MessageID: byID.Messages[0].ID})
	require.NoError(t, err)
	var st provider.Message
	require.NoError(t, v.Get(&st))
	require.Equal(t, byID.Messages[0].ID, st.ID)
	require.NotEmpty(t, st.Status)
	require.Empty(t, st.To, "a status lookup returns the status, not the number")
	require.Empty(t, st.Text, "nor the text")
}

func TestSettle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := prepare(t, b, event)
	require.NoError(t, err)
	settle := func(outcome string) SettleOutput {
		v, err := b.env.ExecuteActivity(b.acts.Settle, SettleInput{Key: event.Key, Outcome: outcome, Reason: "by alice"})
		require.NoError(t, err)
		var out SettleOutput
		require.NoError(t, v.Get(&out))
		return out
	}
	require.Equal(t, "Cancelled", settle("Cancelled").Outcome)
	e, err := b.led.Event(context.Background(), event.Key)
	require.NoError(t, err)
	require.Equal(t, "Cancelled", e.Outcome)
	require.Equal(t, "Cancelled", settle("Delivered").Outcome, "the first settle wins, and the caller learns it")

	// A ledger that cannot be written fails the activity (retried by the
	// workflow), never reports the outcome as recorded.
	require.NoError(t, b.led.Close())
	_, err = b.env.ExecuteActivity(b.acts.Settle, SettleInput{Key: event.Key, Outcome: "Delivered"})
	require.Error(t, err)
}

func TestPolicy(t *testing.T) {
	t.Parallel()
	require.NoError(t, DefaultPolicy().Validate())
	require.Equal(t, 2*time.Hour+50*time.Minute, DefaultPolicy().SendBudget())
	require.Equal(t, DefaultPolicy(), Policy{}.WithDefaults())
	short := Policy{ReplayWindow: time.Minute, WindowMargin: 50 * time.Second}.WithDefaults()
	require.ErrorContains(t, short.Validate(), "leaves no room")
	bad := DefaultPolicy()
	bad.MaxBackoff = time.Millisecond
	require.ErrorContains(t, bad.Validate(), "below its initial interval")
	blindSpot := DefaultPolicy()
	blindSpot.LateEffectHorizon = 5 * time.Second
	require.ErrorContains(t, blindSpot.Validate(), "late-effect horizon 5s is shorter than one attempt (15s)")
	require.Equal(t, 5*time.Second, DefaultPolicy().LastAttemptLead())
	require.Equal(t, time.Second, Policy{AttemptTimeout: time.Second}.WithDefaults().LastAttemptLead())
}

// An attempt of a run that a later run superseded must not send: the
// ledger refuses it, and the error is not retried.
func TestAZombieRunsAttemptIsFencedOff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, err := prepare(t, b, event)
	require.NoError(t, err)
	hold(t, b, event.Key, "a-later-run")
	_, err = send(t, b, SendInput{EventKey: event.Key, Request: p.Request, Budget: p.Policy.SendBudget(), LedgerID: p.LedgerID})
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr))
	require.Equal(t, ErrFenced, appErr.Type())
	require.True(t, appErr.NonRetryable())
	require.ErrorContains(t, err, "run a-later-run holds the event now")
	require.Empty(t, b.sim.Requests(simulator.Filter{}), "nothing reached the provider")
}

// Two workers with two ledgers: the event's activities refuse the ledger
// that did not claim it (retryable, nothing sent, nothing recorded), and
// the event goes on once the worker with the right ledger runs them.
func TestTheWrongLedgerIsRefusedAndTheRightOneGoesOn(t *testing.T) {
	t.Parallel()
	right := setup(t)
	wrong := setup(t) // its own ledger file
	wrong.acts.Providers = right.acts.Providers
	p, err := prepare(t, right, event)
	require.NoError(t, err)
	require.Equal(t, right.led.Identity(), p.LedgerID)

	in := SendInput{EventKey: event.Key, Request: p.Request, Budget: p.Policy.SendBudget(), LedgerID: p.LedgerID}
	_, err = send(t, wrong, in)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr))
	require.Equal(t, ErrWrongLedger, appErr.Type())
	require.False(t, appErr.NonRetryable(), "retried until a worker with the right ledger runs it")
	require.Equal(t, WrongLedgerRetry, appErr.NextRetryDelay(), "at a steady pace, not a growing backoff")
	require.ErrorContains(t, err, "is not the ledger that claimed the event (identity "+right.led.Identity()+")")
	_, err = wrong.env.ExecuteActivity(wrong.acts.Reconcile, ReconcileInput{EventKey: event.Key, Provider: "bird", Keys: []string{event.Key}, LedgerID: p.LedgerID})
	require.ErrorContains(t, err, "is not the ledger that claimed the event")
	_, err = wrong.env.ExecuteActivity(wrong.acts.Settle, SettleInput{Key: event.Key, Outcome: "Delivered", LedgerID: p.LedgerID})
	require.ErrorContains(t, err, "is not the ledger that claimed the event")
	require.Empty(t, right.sim.Requests(simulator.Filter{}), "nothing was sent through the wrong ledger")

	out, err := send(t, right, in)
	require.NoError(t, err)
	require.Equal(t, provider.Accepted, out.Result.Outcome)
	v, err := right.env.ExecuteActivity(right.acts.Settle, SettleInput{Key: event.Key, Outcome: "Delivered", MessageID: out.Result.MessageID, LedgerID: p.LedgerID})
	require.NoError(t, err)
	var settled SettleOutput
	require.NoError(t, v.Get(&settled))
	require.Equal(t, "Delivered", settled.Outcome)
	attempts, err := right.led.Attempts(context.Background(), event.Key)
	require.NoError(t, err)
	require.Len(t, attempts, 1, "every attempt is in the ledger that claimed the event")
}

// The last attempt of a key is a new activity whose attempt number starts
// at 1 again: it is recorded after the retries' rows, never over the
// first one, whose unknown outcome still makes the acceptance uncertain.
func TestTheLastAttemptIsRecordedAfterTheRetries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	p, err := prepare(t, b, event)
	require.NoError(t, err)
	run := "default-test-run-id" // the test environment's
	t0 := b.sim.Now().Add(-time.Minute).Truncate(time.Microsecond)
	for n, outcome := range []provider.Outcome{provider.Unknown, provider.NotExecuted, provider.NotExecuted} {
		row := ledger.Attempt{EventKey: event.Key, SendKey: event.Key, RunID: run, Number: n + 1, StartedAt: t0.Add(time.Duration(n) * time.Second)}
		require.NoError(t, b.led.BeginAttempt(ctx, row))
		row.EndedAt, row.Outcome = row.StartedAt, string(outcome)
		require.NoError(t, b.led.EndAttempt(ctx, row))
	}
	out, err := send(t, b, SendInput{EventKey: event.Key, Request: p.Request, Budget: time.Hour, AfterRetries: true})
	require.NoError(t, err)
	require.True(t, out.Uncertain, "attempt 1's unknown outcome is still on record")
	require.Equal(t, t0.UTC(), out.UncertainSince.UTC())
	rows, err := b.led.Attempts(ctx, event.Key)
	require.NoError(t, err)
	require.Len(t, rows, 4)
	require.Equal(t, string(provider.Unknown), rows[0].Outcome)
	require.Equal(t, 4, rows[3].Number)
	require.Equal(t, string(provider.Accepted), rows[3].Outcome)
}

// At Sendy a key is searched only through the ids recorded under it: a
// resend key whose attempts all ended without an answer cannot be searched,
// even though the first key's message can be looked up.
func TestSendyCannotBeSearchedForAKeyWithoutAnID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	start := b.sim.Now()
	in := PrepareInput{Key: "order-8-shipped", Provider: "sendy", To: "+972502345678", Text: "Order 8 has shipped."}
	p, err := prepare(t, b, in)
	require.NoError(t, err)
	_, err = send(t, b, SendInput{EventKey: in.Key, Request: p.Request, Budget: time.Hour})
	require.NoError(t, err)
	resendKey := in.Key + "~resend-1"
	row := ledger.Attempt{EventKey: in.Key, SendKey: resendKey, RunID: "default-test-run-id", Number: 1, StartedAt: b.sim.Now()}
	require.NoError(t, b.led.BeginAttempt(ctx, row))
	row.EndedAt, row.Outcome = row.StartedAt, string(provider.Unknown)
	require.NoError(t, b.led.EndAttempt(ctx, row))

	out := runReconcile(t, b, ReconcileInput{EventKey: in.Key, Provider: "sendy", Keys: []string{in.Key, resendKey}, Since: start})
	require.Len(t, out.Messages, 1, "the first key's message is found by its id")
	require.False(t, out.Searched, "but nothing can be said of the resend key")
	require.Contains(t, out.How, "sendy cannot be searched for "+resendKey)

	first := runReconcile(t, b, ReconcileInput{EventKey: in.Key, Provider: "sendy", Keys: []string{in.Key}, Since: start})
	require.True(t, first.Searched, "the first key alone is searched through its id")
}

// The ledger's proof that a provider sent nothing: attempts under the
// keys, every one ended "not executed" or rate limited, without an id.
func TestNotExecutedOnly(t *testing.T) {
	t.Parallel()
	ended := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	at := func(key string, o provider.Outcome, id string) ledger.Attempt {
		return ledger.Attempt{SendKey: key, Outcome: string(o), MessageID: id, EndedAt: ended}
	}
	want := map[string]bool{"k": true}
	for name, c := range map[string]struct {
		attempts []ledger.Attempt
		proof    bool
	}{
		"503 and 429 only":            {[]ledger.Attempt{at("k", provider.NotExecuted, ""), at("k", provider.RateLimited, "")}, true},
		"another key's answers":       {[]ledger.Attempt{at("k", provider.NotExecuted, ""), at("other", provider.Accepted, "m-1")}, true},
		"no attempt at all":           {nil, false},
		"an unknown outcome":          {[]ledger.Attempt{at("k", provider.NotExecuted, ""), at("k", provider.Unknown, "")}, false},
		"an accepted attempt":         {[]ledger.Attempt{at("k", provider.Accepted, "m-1")}, false},
		"in progress behind a lock":   {[]ledger.Attempt{at("k", provider.InProgress, "")}, false},
		"an attempt that never ended": {[]ledger.Attempt{{SendKey: "k", Outcome: ""}}, false},
	} {
		require.Equal(t, c.proof, notExecutedOnly(c.attempts, want), name)
	}
}

// A run that resumes the event (a Temporal reset made it, or it continues
// an earlier run) learns the message ids the event's attempts got, from
// Prepare and from Recall, each with its key.
func TestPrepareAndRecallReturnTheMessagesTheLedgerHolds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first, err := prepare(t, b, event)
	require.NoError(t, err)
	require.Empty(t, first.Messages, "a new claim has no messages")
	out, err := send(t, b, SendInput{EventKey: event.Key, Request: first.Request, Budget: time.Hour, LedgerID: first.LedgerID})
	require.NoError(t, err)
	id := out.Result.MessageID
	require.NotEmpty(t, id)

	again, err := prepare(t, b, event)
	require.NoError(t, err)
	require.Equal(t, []SentMessage{{Key: event.Key, ID: id}}, again.Messages)

	v, err := b.env.ExecuteActivity(b.acts.Recall, RecallInput{EventKey: event.Key, SendKey: event.Key, LedgerID: first.LedgerID})
	require.NoError(t, err)
	var rec RecallOutput
	require.NoError(t, v.Get(&rec))
	require.Equal(t, []SentMessage{{Key: event.Key, ID: id}}, rec.Messages)

	// A settled event: nothing more is sent, and its messages are listed.
	_, err = b.led.Settle(context.Background(), event.Key, "Delivered", "delivered", id, b.sim.Now())
	require.NoError(t, err)
	settled, err := prepare(t, b, event)
	require.NoError(t, err)
	require.NotNil(t, settled.Settled)
	require.Equal(t, []SentMessage{{Key: event.Key, ID: id}}, settled.Messages)
	require.Len(t, settled.SendKeys, 1)
	require.Equal(t, event.Key, settled.SendKeys[0].Key)
}

// An attempt the activity's deadline would cut short is not made: an
// answer cut off would leave its outcome unknown. Nothing reaches the
// provider, the ledger has no attempt, and the error says nothing was
// sent, as a provider's "not executed" does.
func TestSendMakesNoAttemptItsDeadlineWouldCutShort(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, err := prepare(t, b, event)
	require.NoError(t, err)
	in := SendInput{EventKey: event.Key, Request: p.Request, Budget: p.Policy.SendBudget(), InProgressDelay: 5 * time.Second}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second) // less than the 15 s an attempt may take
	defer cancel()
	var ts testsuite.WorkflowTestSuite
	short := ts.NewTestActivityEnvironment()
	short.SetWorkerOptions(worker.Options{BackgroundActivityContext: ctx})
	short.RegisterActivity(b.acts)
	_, err = short.ExecuteActivity(b.acts.Send, in)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.Equal(t, ErrNotExecuted, appErr.Type())
	require.Contains(t, appErr.Message(), "no attempt made")
	require.Contains(t, appErr.Message(), "nothing was sent")
	var failure SendFailure
	require.NoError(t, appErr.Details(&failure))
	require.Equal(t, provider.NotExecuted, failure.Result.Outcome)
	require.Empty(t, b.sim.Requests(simulator.Filter{Key: event.Key}), "nothing reached the provider")
	rows, err := b.led.Attempts(context.Background(), event.Key)
	require.NoError(t, err)
	require.Empty(t, rows, "no attempt in the ledger")

	// With the time an attempt needs, it is made.
	require.NoError(t, b.sim.AddFault(simulator.Fault{Kind: simulator.Unavailable, Provider: "bird", Count: 1}))
	_, err = send(t, b, in)
	require.ErrorContains(t, err, "E01033")
	// A skipped attempt after it gives that answer first, for the run's timeline.
	_, err = short.ExecuteActivity(b.acts.Send, in)
	require.True(t, errors.As(err, &appErr), "%v", err)
	require.True(t, strings.HasPrefix(appErr.Message(), "bird: 503"), appErr.Message())
	require.Contains(t, appErr.Message(), "(the last answer; then no attempt made")
	out, err := send(t, b, in)
	require.NoError(t, err)
	require.Equal(t, provider.Accepted, out.Result.Outcome)
}

// TestALookupThatWaitsFirstAsksNothingOnItsFirstAttempt: a lookup with a
// first wait fails its first attempt ErrNotFinal, benign, with the wait as
// its retry delay, and sends the provider no request; without one, or for
// a single lookup, the first attempt looks.
func TestALookupThatWaitsFirstAsksNothingOnItsFirstAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, err := prepare(t, b, event)
	require.NoError(t, err)
	out, err := send(t, b, SendInput{EventKey: event.Key, Request: p.Request, Budget: p.Policy.SendBudget()})
	require.NoError(t, err)
	id := out.Result.MessageID
	lookups := func() int {
		n := 0
		for _, r := range b.sim.Requests(simulator.Filter{Provider: "bird"}) {
			if r.Method == http.MethodGet {
				n++
			}
		}
		return n
	}

	_, err = b.env.ExecuteActivity(b.acts.Status, StatusInput{Provider: "bird", MessageID: id, UntilFinal: true, FirstWait: 10 * time.Second})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, ErrNotFinal, appErr.Type())
	require.Equal(t, 10*time.Second, appErr.NextRetryDelay())
	require.Equal(t, temporal.ApplicationErrorCategoryBenign, appErr.Category())
	require.Zero(t, lookups(), "the first attempt is the wait")

	_, err = b.env.ExecuteActivity(b.acts.Status, StatusInput{Provider: "nobody", MessageID: id, UntilFinal: true, FirstWait: 10 * time.Second})
	require.ErrorContains(t, err, "nobody", "an unknown provider fails at once, not after the wait")

	for _, in := range []StatusInput{
		{Provider: "bird", MessageID: id, UntilFinal: true},
		{Provider: "bird", MessageID: id, FirstWait: 10 * time.Second}, // one lookup, not a schedule
	} {
		before := lookups()
		_, err = b.env.ExecuteActivity(b.acts.Status, in)
		if err != nil {
			require.ErrorAs(t, err, &appErr)
			require.Equal(t, ErrNotFinal, appErr.Type())
			require.Zero(t, appErr.NextRetryDelay())
		}
		require.Equal(t, before+1, lookups(), "%+v looks at once", in)
	}
}

// A request the fleet's pacer holds back reaches nobody: the send is
// recorded as not executed and retried after the pacer's wait, and a
// lookup is retried alike, as an expected failure.
func TestARequestHeldByTheFleetsLimitIsRetriedAfterItsWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, err := sendy.New(sendy.Config{BaseURL: b.url, Token: simulator.DefaultSendyToken, Sender: "MyShop", Timeout: time.Second, Pacer: pacetest.Refuse{Reason: "sendy's limit of 60 requests a minute is used up for the next 4s", RetryAfter: 4 * time.Second}})
	require.NoError(t, err)
	b.acts.Providers[provider.Sendy] = s
	in := event
	in.Key, in.Provider = "order-58214-shipped", "sendy"
	p, err := prepare(t, b, in)
	require.NoError(t, err)
	_, err = send(t, b, SendInput{EventKey: in.Key, Request: p.Request, Budget: p.Policy.SendBudget()})
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, ErrNotExecuted, appErr.Type())
	require.Equal(t, 4*time.Second, appErr.NextRetryDelay())
	require.Contains(t, appErr.Error(), "no request was sent")

	_, err = b.env.ExecuteActivity(b.acts.Status, StatusInput{Provider: "sendy", MessageID: "msg-1"})
	require.ErrorAs(t, err, &appErr)
	require.Equal(t, ErrNotExecuted, appErr.Type())
	require.Equal(t, 4*time.Second, appErr.NextRetryDelay())
	require.Equal(t, temporal.ApplicationErrorCategoryBenign, appErr.Category())
	require.Empty(t, b.sim.Requests(simulator.Filter{Provider: "sendy"}), "requests that reached Sendy")
}

// A new message after an attempt without a certain answer, at a provider
// that cannot be searched by key (Sendy), is written to the ledger as a
// possible duplicate when the Send returns, not only when the run
// settles: a Temporal reset in between starts a run that gets a replay
// of that message, and takes the finding from the ledger at its settle.
// At Bird, which the run searches by key, nothing is written.
func TestANewMessageAfterAnUncertainAttemptIsRecordedAtOnceWhereNoSearchCanTell(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in       PrepareInput
		recorded bool
	}{
		{PrepareInput{Key: "order-58214-shipped", Provider: "sendy", To: "+972502345678", Text: "Order 58214 has shipped."}, true},
		{event, false},
	} {
		b := setup(t)
		ctx := context.Background()
		p, err := prepare(t, b, tc.in)
		require.NoError(t, err)
		row := ledger.Attempt{EventKey: tc.in.Key, SendKey: tc.in.Key, RunID: "default-test-run-id", Number: 1, StartedAt: b.sim.Now().Add(-time.Minute)} // the test environment's run
		require.NoError(t, b.led.BeginAttempt(ctx, row))
		row.EndedAt, row.Outcome = row.StartedAt, string(provider.Unknown)
		require.NoError(t, b.led.EndAttempt(ctx, row))

		out, err := send(t, b, SendInput{EventKey: tc.in.Key, Request: p.Request, Budget: time.Hour, AfterRetries: true})
		require.NoError(t, err)
		require.Equal(t, provider.Accepted, out.Result.Outcome, tc.in.Provider)
		require.True(t, out.Uncertain, tc.in.Provider)
		e, err := b.led.Event(ctx, tc.in.Key)
		require.NoError(t, err)
		require.Equal(t, tc.recorded, slices.Contains(e.Findings, ledger.FindingPossibleDuplicate), "%s: findings %v", tc.in.Provider, e.Findings)
	}
}

// A replay at Sendy, which cannot be searched by key, of a message made
// after an earlier attempt of the key could no longer take effect says
// that attempt did not make it: either it sent nothing or Sendy forgot
// its message before the retention the workers assume, so the ledger
// records a possible duplicate. A replay of a message made while the
// earlier attempt could still take effect is that attempt's own, and
// nothing is recorded.
func TestAReplayOfAMessageMadeAfterAnUncertainAttemptRecordsAPossibleDuplicate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		before   time.Duration // the uncertain attempt's start, before the message
		recorded bool
	}{
		{"an hour before", time.Hour, true},
		{"within the late-effect horizon", 30 * time.Second, false},
	} {
		b := setup(t)
		ctx := context.Background()
		in := PrepareInput{Key: "order-58214-shipped", Provider: "sendy", To: "+972502345678", Text: "Order 58214 has shipped."}
		p, err := prepare(t, b, in)
		require.NoError(t, err)
		row := ledger.Attempt{EventKey: in.Key, SendKey: in.Key, RunID: "default-test-run-id", Number: 1, StartedAt: b.sim.Now().Add(-tc.before)} // the test environment's run
		require.NoError(t, b.led.BeginAttempt(ctx, row))
		row.EndedAt, row.Outcome = row.StartedAt, string(provider.Unknown)
		require.NoError(t, b.led.EndAttempt(ctx, row))
		// The message the replay returns, made now under the key.
		first := b.acts.Providers[provider.Sendy].Send(ctx, p.Request)
		require.Equal(t, provider.Accepted, first.Outcome, first.Reason)

		out, err := send(t, b, SendInput{EventKey: in.Key, Request: p.Request, Budget: 2 * time.Hour, AfterRetries: true})
		require.NoError(t, err)
		require.Equal(t, provider.Replayed, out.Result.Outcome, tc.name)
		require.Equal(t, first.MessageID, out.Result.MessageID, tc.name)
		require.False(t, out.Result.CreatedAt.IsZero(), "%s: the replay carries Sendy's created_at", tc.name)
		require.True(t, out.Uncertain, tc.name)
		e, err := b.led.Event(ctx, in.Key)
		require.NoError(t, err)
		require.Equal(t, tc.recorded, slices.Contains(e.Findings, ledger.FindingPossibleDuplicate), "%s: findings %v", tc.name, e.Findings)
	}
}
