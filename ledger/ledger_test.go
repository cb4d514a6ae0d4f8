package ledger

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// contract runs the behaviour every Ledger must have against a fresh store.
func contract(t *testing.T, open func(t *testing.T) Ledger) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	event := Event{
		Key: "order-58213-shipped", Provider: "bird", Recipient: "+31612345678", Text: "Order 58213 has shipped.",
		Fingerprint: "abc", WorkflowID: "order-58213-shipped", RunID: "run-1", CreatedAt: t0,
	}

	t.Run("claim registers once and finds the same message again", func(t *testing.T) {
		t.Parallel()
		l := open(t)
		c, err := l.Claim(ctx, event)
		require.NoError(t, err)
		require.True(t, c.Created)
		require.Equal(t, event.Key, c.Event.Key)
		require.True(t, c.Event.FirstAttemptAt.IsZero())

		again := event
		again.RunID = "run-2"
		c, err = l.Claim(ctx, again)
		require.NoError(t, err)
		require.False(t, c.Created)
		require.Equal(t, "run-2", c.Event.RunID, "an open event moves to the run that claims it")
		require.Equal(t, t0, c.Event.CreatedAt)
	})

	t.Run("claim refuses a different message under the key", func(t *testing.T) {
		t.Parallel()
		l := open(t)
		_, err := l.Claim(ctx, event)
		require.NoError(t, err)
		for field, mutate := range map[string]func(*Event){
			"recipient": func(e *Event) { e.Recipient = "+31699999999" },
			"text":      func(e *Event) { e.Text = "Order 58213 was cancelled." },
			"provider":  func(e *Event) { e.Provider = "sendy" },
			"sender":    func(e *Event) { e.Sender = "Other" },
		} {
			other := event
			mutate(&other)
			c, err := l.Claim(ctx, other)
			require.ErrorIs(t, err, ErrConflict, field)
			require.ErrorContains(t, err, "another "+field)
			require.Equal(t, event.Recipient, c.Event.Recipient, "the stored record is returned for the error report")
		}
	})

	t.Run("concurrent claims create one record", func(t *testing.T) {
		t.Parallel()
		l := open(t)
		var created atomic.Int32
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := l.Claim(ctx, event)
				if err == nil && c.Created {
					created.Add(1)
				}
			}()
		}
		wg.Wait()
		require.EqualValues(t, 1, created.Load())
	})

	t.Run("attempts are written before and after the call, idempotently", func(t *testing.T) {
		t.Parallel()
		l := open(t)
		_, err := l.Claim(ctx, event)
		require.NoError(t, err)
		_, ok, err := l.FirstAttempt(ctx, event.Key)
		require.NoError(t, err)
		require.False(t, ok)

		a1 := Attempt{EventKey: event.Key, SendKey: event.Key, RunID: "run-1", Number: 1, Fingerprint: "abc", StartedAt: t0.Add(time.Second)}
		require.NoError(t, l.BeginAttempt(ctx, a1))
		require.NoError(t, l.BeginAttempt(ctx, a1), "a retried write of the same attempt is a no-op")
		a1.EndedAt, a1.Outcome, a1.HTTPStatus, a1.Reason = t0.Add(2*time.Second), "unknown", 503, "bird: 503"
		require.NoError(t, l.EndAttempt(ctx, a1))

		a2 := Attempt{EventKey: event.Key, SendKey: event.Key, RunID: "run-1", Number: 2, Fingerprint: "abc", StartedAt: t0.Add(5 * time.Second)}
		require.NoError(t, l.BeginAttempt(ctx, a2)) // a crash: never ended

		resend := Attempt{EventKey: event.Key, SendKey: event.Key + "~resend-1", RunID: "run-1", Number: 1, Fingerprint: "def", StartedAt: t0.Add(time.Hour)}
		require.NoError(t, l.BeginAttempt(ctx, resend))
		resend.EndedAt, resend.Outcome, resend.HTTPStatus, resend.MessageID, resend.Replay, resend.Code = t0.Add(time.Hour+time.Second), "replayed", 202, "m-1", true, ""
		require.NoError(t, l.EndAttempt(ctx, resend))

		got, err := l.Attempts(ctx, event.Key)
		require.NoError(t, err)
		require.Len(t, got, 3)
		require.Equal(t, a1, got[0])
		require.True(t, got[1].Open(), "the cut-off attempt stays as evidence")
		require.Equal(t, resend, got[2], "resend keys are linked to the event")

		first, ok, err := l.FirstAttempt(ctx, event.Key)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, a1.StartedAt, first)
		e, err := l.Event(ctx, event.Key)
		require.NoError(t, err)
		require.Equal(t, a1.StartedAt, e.FirstAttemptAt)

		missing := Attempt{SendKey: "nope", RunID: "run-1", Number: 1}
		require.ErrorContains(t, l.EndAttempt(ctx, missing), "never begun")
	})

	t.Run("settle records the outcome", func(t *testing.T) {
		t.Parallel()
		l := open(t)
		_, err := l.Claim(ctx, event)
		require.NoError(t, err)
		require.NoError(t, l.Settle(ctx, event.Key, "Delivered", "delivered", "m-1", t0.Add(time.Minute)))
		e, err := l.Event(ctx, event.Key)
		require.NoError(t, err)
		require.True(t, e.Settled())
		require.Equal(t, "m-1", e.MessageID)
		require.Equal(t, t0.Add(time.Minute), e.SettledAt)

		again := event
		again.RunID = "run-9"
		c, err := l.Claim(ctx, again)
		require.NoError(t, err)
		require.True(t, c.Event.Settled(), "a later claim learns the event is settled")
		require.Equal(t, "run-1", c.Event.RunID, "a settled event stays with the run that settled it")

		require.ErrorIs(t, l.Settle(ctx, "other", "Delivered", "", "", t0), ErrNotFound)
		_, err = l.Event(ctx, "other")
		require.True(t, errors.Is(err, ErrNotFound))
	})
}

func openSQLite(t *testing.T) Ledger {
	t.Helper()
	l, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "ledger.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func TestSQLiteLedger(t *testing.T) {
	t.Parallel()
	contract(t, openSQLite)
}

func TestSQLiteReopenKeepsRecordsAndSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "ledger.db")
	l, err := OpenSQLite(ctx, path)
	require.NoError(t, err)
	_, err = l.Claim(ctx, Event{Key: "k-1-x", Provider: "sendy", Recipient: "+972501234567", Text: "hi", RunID: "r"})
	require.NoError(t, err)
	require.NoError(t, l.Close())

	l, err = OpenSQLite(ctx, path)
	require.NoError(t, err)
	defer func() { _ = l.Close() }()
	e, err := l.Event(ctx, "k-1-x")
	require.NoError(t, err)
	require.Equal(t, "+972501234567", e.Recipient)
	var versions int
	require.NoError(t, l.db.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&versions))
	require.Equal(t, len(migrations)-1, versions, "each migration ran once")
}

func TestSQLiteRefusesANewerSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	l, err := OpenSQLite(ctx, path)
	require.NoError(t, err)
	_, err = l.db.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (99, 'x')`)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	_, err = OpenSQLite(ctx, path)
	require.ErrorContains(t, err, "run a newer build")
}
