package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"

	"github.com/acme/smsorch/cmd/smsctl/cli"
	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/keys"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/starter"
)

// eventMessages are the messages of an event at both providers, under
// every key of it.
func eventMessages(key string) []simulator.Message {
	var out []simulator.Message
	for _, m := range sim().Messages(simulator.Filter{}) {
		if keys.Base(keys.Key(m.Key)) == keys.Key(key) {
			out = append(out, m)
		}
	}
	return out
}

// withFallback is an event on p that may move to the other provider.
func withFallback(p provider.Name, key string) contract.Input {
	in := input(p, key)
	in.Fallback = string(provider.Sendy)
	if p == provider.Sendy {
		in.Fallback = string(provider.Bird)
	}
	return in
}

// Bird answers every attempt 503 E01033 (the request was not executed)
// until the replay window closes: that proves Bird sent nothing, so the
// run fails over to Sendy under key~via-sendy, and Sendy delivers the
// one message of the event. The ledger records the switch and why.
func TestFailoverWhenBirdProvablySentNothing(t *testing.T) {
	t.Parallel()
	in := withFallback(provider.Bird, newKey("shipped"))
	fault(t, simulator.Fault{Kind: simulator.Unavailable, Provider: string(provider.Bird), Key: in.Key, Rate: 1})
	run, err := start(context.Background(), in)
	require.NoError(t, err)
	res, err := result(t, run)
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State, res.Reason)

	via := in.Key + "~via-sendy"
	require.Empty(t, messages(provider.Bird, in.Key))
	require.Len(t, messages(provider.Sendy, via), 1)
	require.Len(t, eventMessages(in.Key), 1, "one message of the event across both providers")
	require.Equal(t, []string{in.Key, via}, res.KeysUsed)
	require.Len(t, res.Resends, 1)
	require.Equal(t, contract.Resend{Key: via, Provider: "sendy", By: "failover", Reason: res.Resends[0].Reason, Basis: contract.BasisNoMessage}, res.Resends[0])
	require.Contains(t, res.Resends[0].Reason, "without being executed")

	s := status(t, in.Key)
	require.Equal(t, "sendy", s.Provider)
	desc, err := stack.Client.DescribeWorkflowExecution(context.Background(), in.Key, "")
	require.NoError(t, err)
	var shown string
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(
		desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()[contract.ProviderAttribute.GetName()], &shown))
	require.Equal(t, "sendy", shown, "SmsProvider shows the provider in use")
	require.Contains(t, timelineText(s), "moving from bird to sendy under "+via)

	sw, err := stack.Ledger.Switches(context.Background(), in.Key)
	require.NoError(t, err)
	require.Len(t, sw, 1)
	require.Equal(t, "bird", sw[0].From)
	require.Equal(t, "sendy", sw[0].To)
	require.Equal(t, via, sw[0].SendKey)
	require.Equal(t, "failover", sw[0].By)
	require.Contains(t, sw[0].Evidence, "without being executed")

	// The audit asks both providers, each for its own keys.
	code, out, errOut := smsctl(t, "audit", in.Key, "--ledger", stack.Config.LedgerPath, "--simulator", sim().URL)
	require.Equal(t, cli.ExitOK, code, errOut)
	require.Contains(t, errOut, "asked the dev simulator (as bird and sendy) at "+sim().URL)
	require.Contains(t, out, "Moved from bird to sendy under "+via)
	require.Contains(t, out, "Verdict: no duplicate")
	require.Contains(t, out, msgs(provider.Sendy, via))
}

// msgs is the id of the one message under key.
func msgs(p provider.Name, key string) string {
	m := messages(p, key)
	if len(m) != 1 {
		return "(not one message)"
	}
	return m[0].ID
}

// Bird accepts, the answer is lost (the connection drops after the
// commit), and Bird then stays down: the outcome is uncertain, so the run
// does not fail over; it reconciles, finds the message and follows it.
// Likewise when Bird's 5xx came after the send took effect (its answer
// was not stored). One message in all, none at Sendy.
func TestNoFailoverWhileBirdMayHaveSent(t *testing.T) {
	t.Parallel()
	for name, first := range map[string]simulator.Kind{"dropped answer": simulator.DropAfterCommit, "5xx after the send took effect": simulator.Unstored} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			in := withFallback(provider.Bird, newKey("shipped"))
			fault(t, simulator.Fault{Kind: first, Provider: string(provider.Bird), Key: in.Key, Count: 1})
			fault(t, simulator.Fault{Kind: simulator.Unavailable, Provider: string(provider.Bird), Key: in.Key, Rate: 1})
			run, err := start(context.Background(), in)
			require.NoError(t, err)
			res, err := result(t, run)
			require.NoError(t, err)
			require.Equal(t, contract.Delivered, res.State, res.Reason)
			require.Len(t, messages(provider.Bird, in.Key), 1)
			require.Empty(t, messages(provider.Sendy, in.Key+"~via-sendy"))
			require.Len(t, eventMessages(in.Key), 1)
			require.Equal(t, []string{in.Key}, res.KeysUsed)
			require.Empty(t, res.Resends)
			require.Contains(t, timelineText(status(t, in.Key)), "reconciled")
			sw, err := stack.Ledger.Switches(context.Background(), in.Key)
			require.NoError(t, err)
			require.Empty(t, sw)
		})
	}
}

// Sendy times out on a request it executes, then stays down. Sendy cannot
// be searched by key, so whether it sent is unknown: no automatic
// failover; the run waits for a decision and says why it did not move.
func TestNoAutomaticFailoverWhenSendyMayHaveSent(t *testing.T) {
	t.Parallel()
	in := withFallback(provider.Sendy, newKey("shipped"))
	fault(t, simulator.Fault{Kind: simulator.Hang, Provider: string(provider.Sendy), Key: in.Key, Count: 1, Delay: simulator.Duration(2 * time.Second)})
	fault(t, simulator.Fault{Kind: simulator.Unavailable, Provider: string(provider.Sendy), Key: in.Key, Rate: 1})
	_, err := start(context.Background(), in)
	require.NoError(t, err)
	s := awaitState(t, in.Key, contract.AwaitingDecision, 45*time.Second)
	require.Contains(t, timelineText(s), "no failover to bird")
	require.Equal(t, "sendy", s.Provider)
	require.Empty(t, messages(provider.Bird, in.Key+"~via-bird"))
	// It stays that way: nothing moves without a decision.
	time.Sleep(2 * time.Second)
	s = status(t, in.Key)
	require.Equal(t, contract.AwaitingDecision, s.State)
	require.Empty(t, messages(provider.Bird, in.Key+"~via-bird"))
	_, err = starter.New(stack.Client).Decide(context.Background(), in.Key, contract.Decision{Action: contract.ActionCancel, Reason: "test over", By: "test"})
	require.NoError(t, err)
}

// A person can move an event to another provider: resend with a
// provider, after the same search as any resend. Bird's outcome is
// unknown (500s) past the window; its records show nothing; the decision
// names Sendy, and Sendy delivers under key~via-sendy.
func TestDecidedResendAtAnotherProvider(t *testing.T) {
	t.Parallel()
	in := downPastTheWindow(t, provider.Bird)
	st := starter.New(stack.Client)
	_, err := st.Decide(context.Background(), in.Key, contract.Decision{Action: contract.ActionResend, Provider: "nexmo", Reason: "r", By: "b"})
	require.ErrorIs(t, err, starter.ErrInvalid, "an unknown provider is refused before anything happens")
	ack, err := st.Decide(context.Background(), in.Key, contract.Decision{Action: contract.ActionResend, Provider: "sendy", Reason: "Bird is down for the day", By: "alice"})
	require.NoError(t, err, "%+v", ack)
	run := stack.Client.GetWorkflow(context.Background(), in.Key, "")
	res, err := result(t, run)
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State, res.Reason)
	via := in.Key + "~via-sendy"
	require.Len(t, messages(provider.Sendy, via), 1)
	require.Empty(t, messages(provider.Bird, in.Key))
	require.Len(t, res.Resends, 1)
	require.Equal(t, contract.Resend{Key: via, Provider: "sendy", By: "alice", Reason: "Bird is down for the day", Basis: contract.BasisReconciled}, res.Resends[0])
	sw, err := stack.Ledger.Switches(context.Background(), in.Key)
	require.NoError(t, err)
	require.Len(t, sw, 1)
	require.Equal(t, "alice", sw[0].By)
	require.True(t, strings.HasSuffix(sw[0].SendKey, "~via-sendy"))
}
