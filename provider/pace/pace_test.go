package pace

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/provider/pace/pacetest"
	"github.com/acme/smsorch/provider/sendy"
)

// script is a store of slots that answers takes from a list, on a clock
// the test moves.
type script struct {
	clock   time.Time
	answers []answer
	takes   int
}

type answer struct {
	wait  time.Duration
	err   error
	takes time.Duration // how long the take lasts on the clock
}

func (s *script) TakeSlot(_ context.Context, name string, limit int, window time.Duration) (time.Duration, error) {
	if name != "sendy" || limit != 60 || window != Window+Margin {
		return 0, errors.New("unexpected take")
	}
	a := s.answers[s.takes]
	s.takes++
	s.clock = s.clock.Add(a.takes)
	return a.wait, a.err
}

func fleet(t *testing.T, s *script) (*Fleet, *[]time.Duration) {
	t.Helper()
	f, err := New(s, provider.Sendy, 60)
	require.NoError(t, err)
	var slept []time.Duration
	f.now = func() time.Time { return s.clock }
	f.sleep = func(_ context.Context, d time.Duration) error {
		slept = append(slept, d)
		s.clock = s.clock.Add(d)
		return nil
	}
	return f, &slept
}

func TestATakeWaitsForTheSlotTheLedgerNames(t *testing.T) {
	s := &script{clock: time.Unix(1000, 0), answers: []answer{{wait: 700 * time.Millisecond}, {wait: 0}}}
	f, slept := fleet(t, s)
	_, err := f.Take(context.Background(), 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, []time.Duration{700 * time.Millisecond}, *slept)
	require.Equal(t, 2, s.takes)
}

// A slot granted more than LeaveWithin after it was asked for lies too
// far behind the request to bound it: it is left unused and another is
// taken; a ledger that is always that slow sends nothing.
func TestASlotGrantedTooLateIsNotUsed(t *testing.T) {
	s := &script{clock: time.Unix(1000, 0), answers: []answer{{takes: 1500 * time.Millisecond}, {takes: 10 * time.Millisecond}}}
	f, _ := fleet(t, s)
	_, err := f.Take(context.Background(), 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, 2, s.takes, "the late slot was not used")

	s = &script{clock: time.Unix(1000, 0), answers: []answer{{takes: 2 * time.Second}, {takes: 2 * time.Second}, {takes: 2 * time.Second}}}
	f, _ = fleet(t, s)
	_, err = f.Take(context.Background(), 5*time.Second)
	require.ErrorIs(t, err, provider.ErrNotSent)
	require.ErrorContains(t, err, "too slow to pace requests")
}

// A wait that would leave the request less than its reserve before the
// attempt's deadline is not waited: nothing is sent, and the error says
// when a slot frees; so for a ledger that cannot answer.
func TestNoSlotBeforeTheDeadlineSendsNothing(t *testing.T) {
	s := &script{clock: time.Now(), answers: []answer{{wait: 3 * time.Second}}}
	f, slept := fleet(t, s)
	ctx, cancel := context.WithDeadline(context.Background(), s.clock.Add(6*time.Second))
	defer cancel()
	_, err := f.Take(ctx, 5*time.Second)
	var held *provider.NotSentError
	require.ErrorAs(t, err, &held)
	require.Equal(t, 3*time.Second, held.RetryAfter)
	require.ErrorContains(t, err, "limit of 60 requests a minute is used up")
	require.Empty(t, *slept)

	s = &script{clock: time.Now(), answers: []answer{{err: errors.New("database is locked")}}}
	f, _ = fleet(t, s)
	_, err = f.Take(context.Background(), time.Second)
	require.ErrorIs(t, err, provider.ErrNotSent)
	require.ErrorContains(t, err, "database is locked")

	_, err = New(s, provider.Sendy, 0)
	require.ErrorContains(t, err, "at least one request a minute")
}

// A client whose pacer holds a request back makes no request: a send is
// NotExecuted (safe to send again, with the pacer's wait), and a lookup
// fails saying nothing was sent.
func TestAHeldRequestNeverReachesTheProvider(t *testing.T) {
	var reached atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { reached.Add(1) }))
	defer srv.Close()
	c, err := sendy.New(sendy.Config{BaseURL: srv.URL, Token: "t", Sender: "ACME", Pacer: pacetest.Refuse{Reason: "no slot", RetryAfter: 2 * time.Second}})
	require.NoError(t, err)
	req, err := c.Plan("order-1-shipped", "+972502345678", "", "Shipped.")
	require.NoError(t, err)
	res := c.Send(context.Background(), req)
	require.Equal(t, provider.NotExecuted, res.Outcome, res.Reason)
	require.Equal(t, 2*time.Second, res.RetryAfter)
	require.Contains(t, res.Reason, "no slot; no request was sent")
	_, err = c.Get(context.Background(), "msg-1")
	require.ErrorIs(t, err, provider.ErrNotSent)
	require.Zero(t, reached.Load(), "requests that reached the provider")
}

// MostInAnyWindow counts the fullest window, whatever the order of the
// times, and leaves them as they were.
func TestMostInAnyWindowCountsTheFullestWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := []time.Time{t0.Add(61 * time.Second), t0, t0.Add(60 * time.Second), t0.Add(30 * time.Second), t0.Add(59900 * time.Millisecond)}
	require.Equal(t, 4, MostInAnyWindow(at, time.Minute), "30 s, 59.9 s, 60 s and 61 s fall within [30 s, 90 s)")
	require.Equal(t, 3, MostInAnyWindow(at[:4], time.Minute))
	require.Equal(t, t0.Add(61*time.Second), at[0], "the caller's times keep their order")
	require.Zero(t, MostInAnyWindow(nil, time.Minute))
}
