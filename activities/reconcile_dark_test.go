package activities

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/keys"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/provider/bird"
)

// darkReads puts a front before the simulator that passes sends and
// answers every read (a lookup, a page of the list) 503: Bird's records
// cannot be read while its sends go on.
func darkReads(t *testing.T, b bundle) {
	t.Helper()
	target, err := url.Parse(b.url)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			http.Error(w, `{"code":"E00503","name":"Unavailable","message":"down"}`, http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	c, err := bird.New(bird.Config{BaseURL: front.URL, AccessKey: simulator.DefaultBirdAccessKey, WorkspaceID: "ws", ChannelID: "ch", Timeout: time.Second})
	require.NoError(t, err)
	b.acts.Providers[provider.Bird] = c
}

// unexecutedSend makes an attempt of the event that Bird answers 503
// E01033: not executed.
func unexecutedSend(t *testing.T, b bundle, p PrepareOutput) {
	t.Helper()
	require.NoError(t, b.sim.AddFault(simulator.Fault{Kind: simulator.Unavailable, Provider: "bird", Count: 1}))
	_, err := send(t, b, SendInput{EventKey: event.Key, Request: p.Request, Budget: p.Policy.SendBudget()})
	require.Error(t, err, "503 E01033: not executed")
}

// A search whose provider cannot be read is answered from the ledger
// when the ledger proves no attempt under the keys can have sent, and
// fails as before when one may have: a run that never sent says so
// through an outage of the provider's records, and one that may have
// sent never hears "not sent".
func TestReconcileAnswersFromTheLedgerWhenItProvesNothingWasSent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	darkReads(t, b)
	start := b.sim.Now()
	p, err := prepare(t, b, event)
	require.NoError(t, err)
	in := ReconcileInput{EventKey: event.Key, Provider: "bird", Keys: []string{event.Key}, Since: start}

	none := runReconcile(t, b, in) // no attempt began (the send waited in the task queue)
	require.True(t, none.NotSent)
	require.False(t, none.NotExecutedOnly, "no attempt: nothing was answered")
	require.False(t, none.Searched, "the provider's records were not read")
	require.False(t, none.ByKey)
	require.Contains(t, none.How, "0 attempt(s)")
	require.Contains(t, none.How, "could not be read")

	// An attempt answered "not executed" (Bird's 503 E01033) proves
	// nothing was sent either.
	unexecutedSend(t, b, p)
	unexecuted := runReconcile(t, b, in)
	require.True(t, unexecuted.NotSent)
	require.True(t, unexecuted.NotExecutedOnly)
	require.Contains(t, unexecuted.How, "1 attempt(s)")

	// A run that knows a message id needs the provider's word on it.
	_, err = b.env.ExecuteActivity(b.acts.Reconcile, ReconcileInput{EventKey: event.Key, Provider: "bird", Keys: []string{event.Key}, Since: start, KnownIDs: []string{"m-1"}})
	require.Error(t, err, "with a known id the failed search stands")

	// An attempt without a certain answer may have sent: the search's
	// failure stands.
	require.NoError(t, b.sim.AddFault(simulator.Fault{Kind: simulator.Unstored, Provider: "bird", Count: 1}))
	_, err = send(t, b, SendInput{EventKey: event.Key, Request: p.Request, Budget: p.Policy.SendBudget(), AfterRetries: true})
	require.Error(t, err)
	_, err = b.env.ExecuteActivity(b.acts.Reconcile, in)
	require.Error(t, err, "an uncertain attempt: no answer from the ledger alone")
	require.Contains(t, err.Error(), "503")
}

// A run that a reset replaced was accepted under a resend key that the
// replacing run does not know. The ledger holds that answer, so the
// activity must not answer "not sent, only not executed" for the keys
// the run asked about: the workflow would fail over on it (found by the
// review of this change).
func TestReconcileFromTheLedgerSeesTheEventsOtherAcceptedKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	darkReads(t, b)
	start := b.sim.Now()
	p, err := prepare(t, b, event)
	require.NoError(t, err)

	unexecutedSend(t, b, p)

	rk, err := keys.Resend(keys.Key(event.Key), 1)
	require.NoError(t, err)
	rreq, err := b.acts.Providers[provider.Bird].Plan(string(rk), p.Request.To, "", event.Text)
	require.NoError(t, err)
	acc, err := send(t, b, SendInput{EventKey: event.Key, Request: rreq, Budget: p.Policy.SendBudget()})
	require.NoError(t, err)
	require.NotEmpty(t, acc.Result.MessageID)

	_, err = b.env.ExecuteActivity(b.acts.Reconcile, ReconcileInput{EventKey: event.Key, Provider: "bird", Keys: []string{event.Key}, Since: start})
	require.Error(t, err, "the ledger holds message %s of the event under %s: the failed search stands", acc.Result.MessageID, rk)
}
