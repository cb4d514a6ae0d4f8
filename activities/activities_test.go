package activities

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/provider/bird"
	"github.com/acme/smsorch/provider/sendy"
	"github.com/acme/smsorch/simulator"
)

type bundle struct {
	acts *Activities
	sim  *simulator.Server
	env  *testsuite.TestActivityEnvironment
	led  ledger.Ledger
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
	acts := &Activities{
		Providers: map[provider.Name]provider.Client{provider.Bird: b, provider.Sendy: s},
		Ledger:    led,
		Now:       sim.Now, // the simulator's clock, so moving it moves ours
	}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.RegisterActivity(acts)
	return bundle{acts, sim, env, led}
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

	require.NoError(t, b.led.Settle(context.Background(), event.Key, "Delivered", "delivered", "m-1", b.sim.Now()))
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
		switch outcome {
		case provider.InProgress:
			require.Equal(t, 5*time.Second, appErr.NextRetryDelay())
		case provider.RateLimited:
			require.Equal(t, 3*time.Second, appErr.NextRetryDelay())
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

func TestEarlierUncertain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := prepare(t, b, event)
	require.NoError(t, err)
	at := func(n int, outcome provider.Outcome, ended bool) ledger.Attempt {
		row := ledger.Attempt{EventKey: event.Key, SendKey: event.Key, RunID: "r", Number: n, StartedAt: time.Unix(int64(n), 0)}
		require.NoError(t, b.led.BeginAttempt(ctx, row))
		if ended {
			row.EndedAt, row.Outcome = row.StartedAt, string(outcome)
			require.NoError(t, b.led.EndAttempt(ctx, row))
		}
		return row
	}
	at(1, provider.NotExecuted, true)
	this := at(2, provider.Accepted, true)
	require.False(t, b.acts.earlierUncertain(ctx, event.Key, this), "a 503 E01033 is certain: not executed")
	at(3, provider.Unknown, true)
	require.True(t, b.acts.earlierUncertain(ctx, event.Key, at(4, provider.Accepted, true)))

	b2 := setup(t)
	b = b2
	_, err = prepare(t, b, event)
	require.NoError(t, err)
	at(1, "", false) // cut off by a crash
	require.True(t, b.acts.earlierUncertain(ctx, event.Key, at(2, provider.Accepted, true)))
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
}

func TestSettle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := prepare(t, b, event)
	require.NoError(t, err)
	_, err = b.env.ExecuteActivity(b.acts.Settle, SettleInput{Key: event.Key, Outcome: "Cancelled", Reason: "by alice"})
	require.NoError(t, err)
	e, err := b.led.Event(context.Background(), event.Key)
	require.NoError(t, err)
	require.Equal(t, "Cancelled", e.Outcome)
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
}
