package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
)

// The worker's clients of a provider with a limit take their slots in
// the ledger: past the limit, a request waits or is not sent; a provider
// without a limit is not paced.
func TestAProviderWithALimitIsPacedByTheLedger(t *testing.T) {
	t.Parallel()
	var reached atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached.Add(1)
		w.WriteHeader(http.StatusNotFound)
	}))
	defer srv.Close()
	led, err := ledger.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "ledger.db"))
	require.NoError(t, err)
	defer func() { _ = led.Close() }()
	a := &App{Ledger: led, Config: Config{
		Sendy:          SendyConfig{BaseURL: srv.URL, Token: "t0ken-for-the-test", Sender: "ACME"},
		Bird:           BirdConfig{BaseURL: srv.URL, AccessKey: "key-for-the-test", WorkspaceID: "ws", ChannelID: "ch"},
		RateLimits:     map[provider.Name]int{provider.Sendy: 5, provider.Bird: 0},
		AttemptTimeout: time.Second,
	}}
	clients, err := a.providers()
	require.NoError(t, err)

	get := func(p provider.Name) error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := clients[p].Get(ctx, "msg-1")
		return err
	}
	for i := range 5 {
		require.ErrorIs(t, get(provider.Sendy), provider.ErrNotFound, "lookup %d within the limit", i+1)
	}
	err = get(provider.Sendy)
	require.ErrorIs(t, err, provider.ErrNotSent, "the sixth in a minute")
	require.ErrorContains(t, err, "limit of 5 requests a minute is used up")
	require.Equal(t, int64(5), reached.Load())
	for range 6 {
		require.ErrorIs(t, get(provider.Bird), provider.ErrNotFound, "Bird publishes no limit")
	}
	require.Equal(t, int64(11), reached.Load())
}
