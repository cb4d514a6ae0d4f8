package sendy

// The gate (provider/internal/wire) closes a held request's connection
// in GotConn, which is safe on HTTP/1.1 only: a client given with a
// Pacer is copied to speak HTTP/1.1, and one whose transport reports no
// connection is refused. (An independent review found both open.)

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/provider/pace/pacetest"
)

// A paced client given an HTTP/2 client (Config.HTTPClient): the second
// send, held back at its connection, must not close a connection the
// first send shares with it (the first, which Sendy accepted, would end
// Unknown).
func TestAHeldSendDoesNotCutOffAnotherOnAGivenHTTP2Client(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case entered <- struct{}{}:
		default: // a second send reached Sendy: the test fails below, it does not hang
		}
		time.Sleep(500 * time.Millisecond) // Sendy at work
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"id":"msg-1","status":"queued","credits_charged":1}`))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	hc := srv.Client()
	hc.Timeout = 5 * time.Second
	c, err := New(Config{BaseURL: srv.URL, Token: "t", Sender: "ACME", HTTPClient: hc, Pacer: &pacetest.Script{Uses: []bool{true, false}}})
	require.NoError(t, err)
	first, err := c.Plan("order-1", "+31612345678", "", "one")
	require.NoError(t, err)
	second, err := c.Plan("order-2", "+31612345678", "", "two")
	require.NoError(t, err)
	var res1 provider.Result
	done := make(chan struct{})
	go func() { defer close(done); res1 = c.Send(context.Background(), first) }()
	<-entered // Sendy has the first send
	res2 := c.Send(context.Background(), second)
	<-done
	require.Equal(t, provider.NotExecuted, res2.Outcome, res2.Reason)
	require.NotEqual(t, provider.Unknown, res1.Outcome, "the first send, which Sendy accepted, was cut off by the second's gate: %s", res1.Reason)
}

// handlerTransport serves requests in memory, as simulation/world.go's
// transport does (or an HTTP/3 RoundTripper would): no connection, so
// no httptrace GotConn.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// A given client whose transport reports no connection (in memory, or
// HTTP/3) would let the gate fail open: a paced client refuses it.
func TestAPacedClientRefusesATransportThatReportsNoConnection(t *testing.T) {
	t.Parallel()
	hc := &http.Client{Transport: handlerTransport{http.NotFoundHandler()}, Timeout: 5 * time.Second}
	_, err := New(Config{BaseURL: "https://sendy.example", Token: "t", Sender: "ACME", HTTPClient: hc, Pacer: &pacetest.Script{}})
	require.ErrorContains(t, err, "a paced client needs an *http.Transport")
	_, err = New(Config{BaseURL: "https://sendy.example", Token: "t", Sender: "ACME", HTTPClient: hc})
	require.NoError(t, err, "without a pacer, any transport")
}
