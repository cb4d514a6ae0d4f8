package activities

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
)

// slowLedger answers like the ledger, after a delay on its clock read: a
// ledger under load (a pool waiting for a connection), not a ledger down.
type slowLedger struct {
	ledger.Ledger
	delay time.Duration
}

func (s slowLedger) Now(ctx context.Context) (time.Time, error) {
	time.Sleep(s.delay)
	return s.Ledger.Now(ctx)
}

// The send activity's start-to-close is the attempt time plus
// AttemptSlack, and the time it has for an attempt is read when it
// starts: a ledger that takes a little over the slack to answer (5 s of
// the 20 s) does not make every attempt skip, which would leave the run
// unable to send and its ledger empty.
func TestASlowLedgerDoesNotMakeAttemptsSkip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p, err := prepare(t, b, event)
	require.NoError(t, err)
	b.acts.Ledger = slowLedger{Ledger: b.led, delay: AttemptSlack + 100*time.Millisecond}
	in := SendInput{EventKey: event.Key, Request: p.Request, Budget: p.Policy.SendBudget(), InProgressDelay: 5 * time.Second}

	// The deadline of an attempt whose start-to-close binds, as the
	// workflow schedules it: the attempt timeout plus the slack.
	ctx, cancel := context.WithTimeout(context.Background(), p.Policy.AttemptTimeout+AttemptSlack)
	defer cancel()
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{BackgroundActivityContext: ctx})
	env.RegisterActivity(b.acts)
	v, err := env.ExecuteActivity(b.acts.Send, in)
	require.NoError(t, err, "an attempt with its whole start-to-close ahead of it was not made")
	var out SendOutput
	require.NoError(t, v.Get(&out))
	require.Equal(t, provider.Accepted, out.Result.Outcome)
	require.NotEmpty(t, b.sim.Requests(simulator.Filter{Key: event.Key}))
}
