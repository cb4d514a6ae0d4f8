package activities

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
)

// firstLookSetup is setup whose Send waits for its first look on the
// simulator's clock: the wait moves it, and the message is delivered
// after the simulator's delivery delay (2 s by default).
func firstLookSetup(t *testing.T) (bundle, SendInput) {
	t.Helper()
	b := setup(t)
	var waited time.Duration
	b.acts.Sleep = func(_ context.Context, d time.Duration) error {
		waited += d
		b.sim.Advance(d)
		return nil
	}
	p, err := prepare(t, b, event)
	require.NoError(t, err)
	in := SendInput{EventKey: event.Key, Request: p.Request, Budget: p.Policy.SendBudget(), InProgressDelay: 5 * time.Second}
	return b, in
}

func settled(t *testing.T, b bundle) ledger.Event {
	t.Helper()
	e, err := b.led.Event(context.Background(), event.Key)
	require.NoError(t, err)
	return e
}

// A Send asked for its first look waits, looks the accepted message up
// and, finding it delivered, settles the event in the ledger: the run
// needs nothing more between the acceptance and its end.
func TestASendLooksItsMessageUpAndSettlesADeliveredOne(t *testing.T) {
	t.Parallel()
	b, in := firstLookSetup(t)
	in.Look = settlingLook(in, 3*time.Second)
	out, err := send(t, b, in)
	require.NoError(t, err)
	require.Equal(t, provider.Accepted, out.Result.Outcome)
	require.NotEqual(t, provider.StatusDelivered, out.Result.Status, "the answer keeps what the provider answered")
	require.Equal(t, provider.StatusDelivered, out.Looked)
	require.NotNil(t, out.Settled)
	require.Equal(t, Delivered, out.Settled.Outcome)
	require.Equal(t, out.Result.MessageID, out.Settled.MessageID)
	require.Equal(t, DeliveredReason(out.Result.MessageID), out.Settled.Reason)
	e := settled(t, b)
	require.Equal(t, Delivered, e.Outcome)
	require.Equal(t, out.Result.MessageID, e.MessageID)
	require.False(t, out.AcceptedAt.IsZero())
	require.Len(t, b.sim.Requests(simulator.Filter{Provider: "bird"}), 2, "one send and one lookup")
}

// A look that finds the message not delivered yet, or is not asked to
// settle, reports the status and settles nothing.
func TestASendsFirstLookSettlesOnlyADeliveredMessageItIsAskedToSettle(t *testing.T) {
	t.Parallel()
	b, in := firstLookSetup(t)
	in.Look = &FirstLook{After: time.Second, Settle: &SettleInput{KnownKeys: []string{in.Request.Key}}}
	out, err := send(t, b, in)
	require.NoError(t, err)
	require.NotEmpty(t, out.Looked)
	require.False(t, out.Looked.Final(), "1 s after the acceptance the simulator has not delivered it")
	requireNoSettle(t, b, out)

	b, in = firstLookSetup(t)
	in.Look = &FirstLook{After: 3 * time.Second}
	out, err = send(t, b, in)
	require.NoError(t, err)
	require.Equal(t, provider.StatusDelivered, out.Looked)
	require.Nil(t, out.Settled, "no settle was asked for")
	require.Empty(t, settled(t, b).Outcome)
}

// An earlier attempt of the key without a certain answer may have sent
// a second message: the run looks behind it before it settles, so the
// Send does not settle.
func TestASendAfterAnUncertainAttemptLeavesTheSettleToTheRun(t *testing.T) {
	t.Parallel()
	b, in := firstLookSetup(t)
	ctx := context.Background()
	row := ledger.Attempt{EventKey: event.Key, SendKey: in.Request.Key, RunID: "earlier", Number: 1, StartedAt: b.sim.Now()}
	hold(t, b, event.Key, "earlier")
	require.NoError(t, b.led.BeginAttempt(ctx, row)) // never ended: a crash
	hold(t, b, event.Key, "default-test-run-id")
	in.Look = settlingLook(in, 3*time.Second)
	out, err := send(t, b, in)
	require.NoError(t, err)
	require.True(t, out.Uncertain)
	require.Equal(t, provider.StatusDelivered, out.Looked)
	requireNoSettle(t, b, out)
}

// A key in the ledger the run did not name (another run of the workflow
// used it) stops the Send's settle: the run searches it first.
func TestASendLeavesTheSettleToTheRunWhenTheLedgerHoldsAKeyItDidNotName(t *testing.T) {
	t.Parallel()
	b, in := firstLookSetup(t)
	ctx := context.Background()
	hold(t, b, event.Key, "other")
	row := ledger.Attempt{EventKey: event.Key, SendKey: event.Key + "-r1", RunID: "other", Number: 1, StartedAt: b.sim.Now()}
	require.NoError(t, b.led.BeginAttempt(ctx, row))
	row.EndedAt, row.Outcome = row.StartedAt, string(provider.Rejected)
	require.NoError(t, b.led.EndAttempt(ctx, row))
	hold(t, b, event.Key, "default-test-run-id")
	in.Look = settlingLook(in, 3*time.Second)
	out, err := send(t, b, in)
	require.NoError(t, err)
	require.Equal(t, provider.StatusDelivered, out.Looked)
	requireNoSettle(t, b, out)
}

// The look never changes the send's result: a lookup that fails, or an
// attempt with no time left for it, leaves it out.
func TestASendsFirstLookThatFailsOrHasNoTimeIsLeftOut(t *testing.T) {
	t.Parallel()
	b, in := firstLookSetup(t)
	b.acts.Sleep = func(context.Context, time.Duration) error { return errors.New("worker stopping") }
	in.Look = settlingLook(in, 3*time.Second)
	out, err := send(t, b, in)
	require.NoError(t, err)
	require.Equal(t, provider.Accepted, out.Result.Outcome)
	require.Empty(t, out.Looked)
	require.Nil(t, out.Settled)

	b, in = firstLookSetup(t)
	b.acts.Providers[provider.Bird] = failingGet{b.acts.Providers[provider.Bird]}
	in.Look = settlingLook(in, 3*time.Second)
	out, err = send(t, b, in)
	require.NoError(t, err)
	require.Equal(t, provider.Accepted, out.Result.Outcome)
	require.Empty(t, out.Looked, "the lookup failed")
	require.Nil(t, out.Settled)

	// The activity's deadline leaves no time for the wait and the look.
	b, in = firstLookSetup(t)
	in.Look = &FirstLook{After: time.Hour, Settle: &SettleInput{KnownKeys: []string{in.Request.Key}}}
	b.env.SetTestTimeout(30 * time.Second)
	out, err = send(t, b, in)
	require.NoError(t, err)
	require.Empty(t, out.Looked)
	require.Nil(t, out.Settled)
	require.Len(t, b.sim.Requests(simulator.Filter{Provider: "bird"}), 1, "only the send")
}

// failingGet is a provider whose lookups fail.
type failingGet struct{ provider.Client }

func (failingGet) Get(context.Context, string) (provider.Message, error) {
	return provider.Message{}, errors.New("connection reset by peer")
}

// slowGet is a provider whose lookups take a while (inside
// FirstLookTimeout).
type slowGet struct {
	provider.Client
	delay time.Duration
}

func (s slowGet) Get(ctx context.Context, id string) (provider.Message, error) {
	time.Sleep(s.delay)
	return s.Client.Get(ctx, id)
}

// sendWithDeadline runs Send as the workflow schedules it with a look:
// its deadline the attempt's start-to-close plus FirstLookTime.
func sendWithDeadline(t *testing.T, b bundle, in SendInput, deadline time.Time) (SendOutput, error) {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{BackgroundActivityContext: ctx})
	env.RegisterActivity(b.acts)
	v, err := env.ExecuteActivity(b.acts.Send, in)
	if err != nil {
		return SendOutput{}, err
	}
	var out SendOutput
	require.NoError(t, v.Get(&out))
	return out, nil
}

// The look keeps time for the settle and for the answer to reach the
// run: with the ledger under the load TestASlowLedgerDoesNotMakeAttemptsSkip
// accepts (a clock read a little over AttemptSlack) and a slow lookup, an
// accepted attempt still returns before its deadline. (Found by review:
// the look reserved nothing after it, so an accepted answer could come
// after the server had timed the attempt out.)
func TestAFirstLookLeavesTheAcceptedAnswerTimeToReachTheRun(t *testing.T) {
	t.Parallel()
	b, in := firstLookSetup(t)
	pol := DefaultPolicy()
	pol.AttemptTimeout = time.Second // the simulator's client timeout in setup
	b.acts.Policies = map[provider.Name]Policy{provider.Bird: pol}
	b.acts.Ledger = slowLedger{Ledger: b.led, delay: AttemptSlack + 100*time.Millisecond}
	b.acts.Providers[provider.Bird] = slowGet{Client: b.acts.Providers[provider.Bird], delay: time.Second}
	b.acts.Sleep = func(_ context.Context, d time.Duration) error {
		b.sim.Advance(3 * time.Second) // delivered when looked at
		time.Sleep(d)
		return nil
	}
	in.Look = &FirstLook{After: 200 * time.Millisecond, SendWithin: pol.AttemptTimeout + AttemptSlack, Settle: &SettleInput{KnownKeys: []string{in.Request.Key}}}
	deadline := time.Now().Add(in.Look.SendWithin + FirstLookTime(in.Look))
	out, err := sendWithDeadline(t, b, in, deadline)
	returned := time.Now()
	require.NoError(t, err)
	require.Equal(t, provider.Accepted, out.Result.Outcome)
	require.True(t, returned.Before(deadline), "the Send of an accepted message returned %s after its deadline: its answer would be lost",
		returned.Sub(deadline).Round(time.Millisecond))
}

// slowBegin is a ledger whose BeginAttempt is slow (a lock wait under
// load).
type slowBegin struct {
	ledger.Ledger
	delay time.Duration
}

func (s slowBegin) BeginAttempt(ctx context.Context, a ledger.Attempt) error {
	time.Sleep(s.delay)
	return s.Ledger.BeginAttempt(ctx, a)
}

// The look's time is not the send's: a request leaves within the
// attempt's start-to-close without the look (SendWithin) or not at all,
// since a hung attempt's late effect is counted from its start. (Found by
// review: the look's time let a request leave up to 35 s after its
// attempt began, past what the late-effect horizon allows.)
func TestAFirstLooksTimeDoesNotLetARequestLeaveLater(t *testing.T) {
	t.Parallel()
	b, in := firstLookSetup(t)
	in.Look = &FirstLook{After: 10 * time.Second, SendWithin: 2 * time.Second}
	b.acts.Ledger = slowBegin{Ledger: b.led, delay: 2*time.Second + 500*time.Millisecond}
	_, err := sendWithDeadline(t, b, in, time.Now().Add(in.Look.SendWithin+FirstLookTime(in.Look)))
	require.Error(t, err, "the attempt's own time ran out before its request could leave")
	require.Empty(t, b.sim.Requests(simulator.Filter{Provider: "bird"}), "nothing left after the attempt's own time")
}

// A worker that begins to stop does not hold an accepted answer back for
// the look: the Send returns at once, without it.
func TestAStoppingWorkerSendsTheAcceptedAnswerWithoutTheLook(t *testing.T) {
	t.Parallel()
	b, in := firstLookSetup(t)
	b.acts.Sleep = nil // the worker's own wait
	stop := make(chan struct{})
	close(stop)
	b.env.SetWorkerStopChannel(stop)
	// Two minutes fit the activity environment's ten-minute deadline.
	in.Look = &FirstLook{After: 2 * time.Minute, Settle: &SettleInput{KnownKeys: []string{in.Request.Key}}}
	begun := time.Now()
	out, err := send(t, b, in)
	require.NoError(t, err)
	require.Equal(t, provider.Accepted, out.Result.Outcome)
	require.Empty(t, out.Looked)
	require.Less(t, time.Since(begun), time.Minute, "it did not wait the two minutes")
}

// A Send whose look found the message delivered and settled the event,
// and whose completion never reached the server (the worker died after
// the settle): the server runs the attempt again. The retry sends the
// same key and bytes, so Bird replays the first answer; nothing new is
// sent, and the ledger, the retry's answer and the settle agree on the
// one message.
func TestARetryAfterTheSendsSettleSendsNothingNewAndAgrees(t *testing.T) {
	t.Parallel()
	b, in := firstLookSetup(t)
	in.Look = settlingLook(in, 3*time.Second)
	first, err := send(t, b, in)
	require.NoError(t, err)
	require.NotNil(t, first.Settled)

	// The retried attempt: its own ledger row, as attempt 2 has.
	in.AfterRetries = true
	again, err := send(t, b, in)
	require.NoError(t, err)
	require.Equal(t, provider.Replayed, again.Result.Outcome)
	require.Equal(t, first.Result.MessageID, again.Result.MessageID)
	require.False(t, again.Uncertain, "the first attempt's answer is on record")
	require.Len(t, b.sim.Messages(simulator.Filter{Provider: "bird"}), 1, "one SMS")
	e := settled(t, b)
	require.Equal(t, Delivered, e.Outcome)
	require.Equal(t, first.Result.MessageID, e.MessageID)
	if again.Settled != nil {
		require.Equal(t, Delivered, again.Settled.Outcome)
		require.Equal(t, first.Result.MessageID, again.Settled.MessageID)
	}
}

// failingSettle is a ledger whose settle fails.
type failingSettle struct{ ledger.Ledger }

func (failingSettle) Settle(context.Context, string, string, string, string, time.Time) (ledger.Event, error) {
	return ledger.Event{}, errors.New("ledger: connection refused")
}

// A settle that fails changes nothing the send did: the answer and the
// look stand, the Send reports no settle, and the ledger holds none.
func TestASendWhoseSettleFailsLeavesItToTheRun(t *testing.T) {
	t.Parallel()
	b, in := firstLookSetup(t)
	b.acts.Ledger = failingSettle{b.led}
	in.Look = settlingLook(in, 3*time.Second)
	out, err := send(t, b, in)
	require.NoError(t, err)
	require.Equal(t, provider.Accepted, out.Result.Outcome)
	require.Equal(t, provider.StatusDelivered, out.Looked)
	requireNoSettle(t, b, out)
}

// An answer dropped after the provider committed it (unknown), then
// replayed: the replay's look finds the message delivered, but the
// unknown attempt may have sent a second one, so the Send does not
// settle.
func TestAReplayAfterADroppedAnswerIsNotSettledByTheSend(t *testing.T) {
	t.Parallel()
	b, in := firstLookSetup(t)
	require.NoError(t, b.sim.AddFault(simulator.Fault{Kind: simulator.DropAfterCommit, Provider: "bird", Count: 1}))
	in.Look = settlingLook(in, 3*time.Second)
	_, err := send(t, b, in)
	require.Error(t, err, "the answer was dropped")
	in.AfterRetries = true
	out, err := send(t, b, in)
	require.NoError(t, err)
	require.Equal(t, provider.Replayed, out.Result.Outcome)
	require.True(t, out.Uncertain)
	require.Equal(t, provider.StatusDelivered, out.Looked)
	requireNoSettle(t, b, out)
}

// A look that finds the message failed reports it and settles nothing.
func TestAFirstLookThatFindsTheMessageFailedSettlesNothing(t *testing.T) {
	t.Parallel()
	b, in := firstLookSetup(t)
	require.NoError(t, b.sim.AddFault(simulator.Fault{Kind: simulator.FailDelivery, Provider: "bird", Count: 1}))
	in.Look = settlingLook(in, 3*time.Second)
	out, err := send(t, b, in)
	require.NoError(t, err)
	require.Equal(t, provider.Accepted, out.Result.Outcome)
	require.True(t, out.Looked.Failed(), "looked: %s", out.Looked)
	requireNoSettle(t, b, out)
}

// settlingLook asks a Send for a look after the wait and, the message
// found delivered, for the settle under its one key.
func settlingLook(in SendInput, after time.Duration) *FirstLook {
	return &FirstLook{After: after, Settle: &SettleInput{KnownKeys: []string{in.Request.Key}}}
}

// requireNoSettle checks that the Send reports no settle and the ledger
// holds none.
func requireNoSettle(t *testing.T, b bundle, out SendOutput) {
	t.Helper()
	require.Nil(t, out.Settled)
	require.Empty(t, settled(t, b).Outcome)
}
