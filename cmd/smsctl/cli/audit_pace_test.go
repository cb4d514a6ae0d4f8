package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider/pace"
)

// `smsctl audit --sendy-url` asks Sendy with the fleet's token
// (SENDY_TOKEN), so its lookups take slots in the fleet's ledger: with
// the minute's 60 slots taken by the workers, it asks nothing, where it
// would have been the 61st request in the minute.
func TestTheAuditTakesASlotOfTheFleetsSendyLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	led, err := ledger.OpenSQLite(ctx, path)
	require.NoError(t, err)
	_, err = led.Claim(ctx, ledger.Event{Key: "otp-7-1", Provider: "sendy", Recipient: "+31612345678", Text: "Your code is 482913",
		Fingerprint: "f", WorkflowID: "otp-7-1", RunID: "r", CreatedAt: time.Now()})
	require.NoError(t, err)
	at := ledger.Attempt{EventKey: "otp-7-1", SendKey: "otp-7-1", RunID: "r", Number: 1, Fingerprint: "f", StartedAt: time.Now()}
	require.NoError(t, led.BeginAttempt(ctx, at))
	at.EndedAt, at.Outcome, at.HTTPStatus, at.MessageID = time.Now(), "accepted", 202, "msg-1"
	require.NoError(t, led.EndAttempt(ctx, at))
	// The fleet used the minute's 60 slots.
	for range 60 {
		wait, err := led.TakeSlot(ctx, "sendy", 60, pace.Window+pace.Margin)
		require.NoError(t, err)
		require.Zero(t, wait)
	}
	require.NoError(t, led.Close())

	var reached atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"msg-1","status":"delivered","to":"+31612345678","body":"Your code is 482913"}`))
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = Run(cctx, []string{"audit", "otp-7-1", "--ledger", path, "--sendy-url", srv.URL}, &out, &errOut, []string{"SENDY_TOKEN=t0ken"})
	require.Zero(t, reached.Load(), "requests to Sendy beyond the fleet's 60 in the minute; audit said: %s%s", out.String(), errOut.String())
	require.Contains(t, out.String()+errOut.String(), "no request was sent")

	// Without a limit (a token of its own, say), it asks.
	out.Reset()
	errOut.Reset()
	Run(ctx, []string{"audit", "otp-7-1", "--ledger", path, "--sendy-url", srv.URL, "--sendy-rate-limit", "0"}, &out, &errOut, []string{"SENDY_TOKEN=t0ken"})
	require.Equal(t, int64(1), reached.Load())
}
