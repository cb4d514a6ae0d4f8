package pace

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/provider/sendy"
)

// The pacers alone hold the limit, whatever the demand: two workers (two
// handles of one ledger file, a client each) with twelve callers making
// Sendy requests as fast as they are let, for longer than a minute,
// sends and lookups mixed, no task queue to spread them. Sendy (the
// simulator, which enforces its 60 a minute) sees at most 60 in any 60 s
// and never answers 429, and the callers kept the limit busy.
func TestTwoWorkersPacedByOneLedgerNeverPassSendysLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("lasts a minute")
	}
	t.Parallel()
	sim, err := simulator.New(simulator.Config{Seed: 7})
	require.NoError(t, err)
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "ledger.db")
	var clients []*sendy.Client
	for range 2 {
		led, err := ledger.OpenSQLite(context.Background(), path)
		require.NoError(t, err)
		t.Cleanup(func() { _ = led.Close() })
		f, err := New(led, provider.Sendy, simulator.DefaultSendyRateLimit)
		require.NoError(t, err)
		c, err := sendy.New(sendy.Config{BaseURL: srv.URL, Token: logging.Secret(sim.Config().SendyToken), Sender: "ACME", Timeout: 5 * time.Second, Pacer: f})
		require.NoError(t, err)
		clients = append(clients, c)
	}

	const run = 65 * time.Second
	end := time.Now().Add(run)
	var mu sync.Mutex
	held := 0
	var wg sync.WaitGroup
	for i := range 12 {
		c := clients[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Now().Before(end); n++ {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				var err error
				if n%2 == 0 {
					req, perr := c.Plan(fmt.Sprintf("order-%d-%d-code", i, n), "+972502345678", "", "Your code is 4711.")
					require.NoError(t, perr)
					if res := c.Send(ctx, req); res.Outcome == provider.NotExecuted {
						err = &provider.NotSentError{Reason: res.Reason, RetryAfter: res.RetryAfter}
					}
				} else {
					_, err = c.Get(ctx, "msg-none")
				}
				cancel()
				var ns *provider.NotSentError
				if errors.As(err, &ns) {
					mu.Lock()
					held++
					mu.Unlock()
					// As an activity's retry would: after the wait the
					// pacer named, at most a second here to keep asking.
					time.Sleep(min(max(ns.RetryAfter, 10*time.Millisecond), time.Second))
				}
			}
		}()
	}
	wg.Wait()

	reqs := sim.Requests(simulator.Filter{Provider: "sendy"})
	var at []time.Time
	limited := 0
	for _, r := range reqs {
		at = append(at, r.At)
		if r.Status == http.StatusTooManyRequests {
			limited++
		}
	}
	most := MostInAnyWindow(at, time.Minute)
	t.Logf("12 callers on 2 workers for %s: %d requests reached Sendy, at most %d in any 60 s, %d answered 429; %d held back (no slot before their deadline)",
		run, len(reqs), most, limited, held)
	require.LessOrEqual(t, most, 60, "requests in a 60 s window at Sendy")
	require.Zero(t, limited, "429 answers")
	require.GreaterOrEqual(t, len(reqs), 60, "the callers used the limit")
	require.Positive(t, held, "the demand was above the limit")
}
