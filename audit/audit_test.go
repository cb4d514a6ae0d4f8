package audit

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/provider/bird"
	"github.com/acme/smsorch/provider/sendy"
)

type bundle struct {
	sim   *simulator.Server
	led   ledger.Ledger
	bird  provider.Client
	sendy provider.Client
}

func setup(t *testing.T) bundle {
	t.Helper()
	sim, err := simulator.New(simulator.Config{})
	require.NoError(t, err)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	led, err := ledger.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "ledger.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = led.Close() })
	b, err := bird.New(bird.Config{BaseURL: srv.URL, AccessKey: simulator.DefaultBirdAccessKey, WorkspaceID: "ws", ChannelID: "ch"})
	require.NoError(t, err)
	s, err := sendy.New(sendy.Config{BaseURL: srv.URL, Token: simulator.DefaultSendyToken, Sender: "Shop"})
	require.NoError(t, err)
	return bundle{sim, led, b, s}
}

// attempt sends through the client and records the attempt in the ledger,
// as the send activity does.
func (b bundle) attempt(t *testing.T, c provider.Client, req provider.Request, n int) provider.Result {
	t.Helper()
	ctx := context.Background()
	row := ledger.Attempt{EventKey: "order-58213-shipped", SendKey: req.Key, RunID: "run-1", Number: n, Fingerprint: req.Fingerprint(), StartedAt: time.Now()}
	require.NoError(t, b.led.BeginAttempt(ctx, row))
	res := c.Send(ctx, req)
	row.EndedAt, row.Outcome, row.HTTPStatus, row.MessageID, row.Code = time.Now(), string(res.Outcome), res.HTTPStatus, res.MessageID, res.Code
	require.NoError(t, b.led.EndAttempt(ctx, row))
	return res
}

func (b bundle) claim(t *testing.T, req provider.Request) {
	t.Helper()
	_, err := b.led.Claim(context.Background(), ledger.Event{Key: req.Key, Provider: string(req.Provider), Recipient: req.To, Sender: req.From, Text: req.Text, RunID: "run-1", CreatedAt: time.Now()})
	require.NoError(t, err)
}

func TestProvenDuplicateCarriesASupportRequest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req, err := b.bird.Plan("order-58213-shipped", "+31612345678", "", "Order 58213 has shipped.")
	require.NoError(t, err)
	b.claim(t, req)
	require.NoError(t, b.sim.AddFault(simulator.Fault{Kind: simulator.Unstored, Provider: "bird"}))
	require.Equal(t, provider.Unknown, b.attempt(t, b.bird, req, 1).Outcome)
	second := b.attempt(t, b.bird, req, 2)
	require.Equal(t, provider.Accepted, second.Outcome)

	r, err := Build(context.Background(), b.led, map[provider.Name]provider.Client{provider.Bird: b.bird}, req.Key, time.Now())
	require.NoError(t, err)
	require.Equal(t, []string{req.Key}, r.Duplicates)
	ids := []string{}
	for _, m := range b.sim.Messages(simulator.Filter{Key: req.Key}) {
		ids = append(ids, m.ID)
	}
	require.ElementsMatch(t, ids, r.Accepted[req.Key])
	require.Contains(t, r.Verdict(), "PROVEN DUPLICATE SEND: key order-58213-shipped has 2 accepted message ids")

	var out bytes.Buffer
	require.NoError(t, r.WriteText(&out))
	text := out.String()
	for _, want := range []string{"Support request:", "Destination:     +31612345678", "Idempotency-Key: order-58213-shipped", ids[0], ids[1], "Our ledger, every attempt:", "unknown", "accepted"} {
		require.Contains(t, text, want)
	}
}

func TestNoDuplicateAndUnsearchable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req, err := b.bird.Plan("order-58213-shipped", "+31612345678", "", "Order 58213 has shipped.")
	require.NoError(t, err)
	b.claim(t, req)
	require.Equal(t, provider.Accepted, b.attempt(t, b.bird, req, 1).Outcome)
	require.Equal(t, provider.Replayed, b.attempt(t, b.bird, req, 2).Outcome)
	r, err := Build(context.Background(), b.led, map[provider.Name]provider.Client{provider.Bird: b.bird}, req.Key, time.Now())
	require.NoError(t, err)
	require.Empty(t, r.Duplicates)
	require.Len(t, r.Accepted[req.Key], 1, "a replay is the same message")
	require.Contains(t, r.Verdict(), "no duplicate")

	b2 := setup(t)
	sreq, err := b2.sendy.Plan("order-58213-shipped", "+972502345678", "", "Order 58213 has shipped.")
	require.NoError(t, err)
	b2.claim(t, sreq)
	require.NoError(t, b2.sim.AddFault(simulator.Fault{Kind: simulator.Error5xx, Provider: "sendy"}))
	require.Equal(t, provider.Unknown, b2.attempt(t, b2.sendy, sreq, 1).Outcome)
	r, err = Build(context.Background(), b2.led, map[provider.Name]provider.Client{provider.Sendy: b2.sendy}, sreq.Key, time.Now())
	require.NoError(t, err)
	require.False(t, r.Searched)
	require.Contains(t, r.Verdict(), "NOT PROVEN EITHER WAY")
}

func TestUnknownEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := Build(context.Background(), b.led, map[provider.Name]provider.Client{provider.Bird: b.bird}, "order-1-shipped", time.Now())
	require.True(t, errors.Is(err, ledger.ErrNotFound))
}
