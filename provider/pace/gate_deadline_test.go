package pace

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/provider/sendy"
)

// slowRetake grants the first take at once and every later one (the
// gate's take for a stale slot) after delay: a ledger under load.
type slowRetake struct {
	Slots
	n     atomic.Int64
	delay time.Duration
}

func (s *slowRetake) TakeSlot(ctx context.Context, name string, limit int, window time.Duration) (time.Duration, error) {
	if s.n.Add(1) > 1 {
		time.Sleep(s.delay)
	}
	return s.Slots.TakeSlot(ctx, name, limit, window)
}

// A send whose slot went stale during a slow handshake takes a fresh
// one at its connection (Slot.Use, in GotConn). When the client's own
// timeout runs out meanwhile, the gate, which has let no byte out yet,
// holds the send back (NotExecuted) rather than hand net/http a request
// with no time left, whose outcome would be Unknown although nothing
// reached Sendy. (A review found this open.)
func TestASendTheGateDelayedPastItsTimeoutIsNotUnknownUnsent(t *testing.T) {
	t.Parallel()
	gateDeadline(t, 300*time.Millisecond)
}

// The same with a ledger that answers at once: never Unknown either.
func TestASendWhoseConnectionTookMostOfItsTimeIsNotUnknown(t *testing.T) {
	t.Parallel()
	gateDeadline(t, 0)
}

func gateDeadline(t *testing.T, retake time.Duration) {
	const trials = 6
	var unsentUnknown, sentUnknown, other atomic.Int64
	var wg sync.WaitGroup
	for range trials {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got atomic.Int64
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got.Add(1)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusAccepted)
				_, _ = w.Write([]byte(`{"id":"msg-1","status":"queued","credits_charged":1}`))
			}))
			srv.Listener = slowHandshake{Listener: srv.Listener, delay: 1100 * time.Millisecond}
			srv.StartTLS()
			defer srv.Close()
			led, err := ledger.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "ledger.db"))
			require.NoError(t, err)
			defer func() { _ = led.Close() }()
			sl := &slowRetake{Slots: led, delay: retake}
			f, err := New(sl, provider.Sendy, 60)
			require.NoError(t, err)
			hc := srv.Client()
			hc.Timeout = 1200 * time.Millisecond
			c, err := sendy.New(sendy.Config{BaseURL: srv.URL, Token: "t", Sender: "ACME", HTTPClient: hc, Pacer: f})
			require.NoError(t, err)
			req, err := c.Plan("order-1", "+31612345678", "", "one")
			require.NoError(t, err)
			res := c.Send(context.Background(), req)
			time.Sleep(200 * time.Millisecond)
			require.EqualValues(t, 2, sl.n.Load(), "the slot went stale in the handshake and the gate took a fresh one (%s)", res.Reason)
			switch {
			case res.Outcome == provider.Unknown && got.Load() == 0:
				unsentUnknown.Add(1)
				t.Logf("Unknown, and Sendy got nothing: %s", res.Reason)
			case res.Outcome == provider.Unknown:
				sentUnknown.Add(1)
			default:
				other.Add(1)
				t.Logf("%s: %s", res.Outcome, res.Reason)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d trials: %d Unknown and unsent, %d Unknown and sent (after the attempt's timeout), %d other", trials, unsentUnknown.Load(), sentUnknown.Load(), other.Load())
	require.Zero(t, unsentUnknown.Load(), "sends that never reached Sendy ended Unknown")
	require.Zero(t, sentUnknown.Load(), "sends the gate let out after the attempt's own timeout had passed")
}
