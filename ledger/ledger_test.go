package ledger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/internal/pgtest"
)

// contract runs the behaviour every Ledger must have against a fresh
// store. dbClock is true for stores that take attempt times from their
// own clock (Postgres) instead of the caller's.
func contract(t *testing.T, open func(t *testing.T) Ledger, dbClock bool) {
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

	t.Run("a switch to another provider is recorded once, with its evidence", func(t *testing.T) {
		t.Parallel()
		l := open(t)
		_, err := l.Claim(ctx, event)
		require.NoError(t, err)
		none, err := l.Switches(ctx, event.Key)
		require.NoError(t, err)
		require.Empty(t, none)
		sw := Switch{EventKey: event.Key, SendKey: event.Key + "~via-sendy", From: "bird", To: "sendy", By: "failover",
			Evidence: "every attempt was answered 503 E01033 (not executed)", At: t0.Add(3 * time.Hour)}
		require.NoError(t, l.RecordSwitch(ctx, sw))
		again := sw
		again.Evidence, again.At = "another write of the same switch", t0.Add(4*time.Hour)
		require.NoError(t, l.RecordSwitch(ctx, again), "a retried write changes nothing")
		got, err := l.Switches(ctx, event.Key)
		require.NoError(t, err)
		require.Equal(t, []Switch{sw}, got)
	})

	t.Run("claim refuses a different message under the key", func(t *testing.T) {
		t.Parallel()
		l := open(t)
		_, err := l.Claim(ctx, event)
		require.NoError(t, err)
		for want, mutate := range map[string]func(*Event){
			"another recipient":   func(e *Event) { e.Recipient = "+31699999999" },
			"another text":        func(e *Event) { e.Text = "Order 58213 was cancelled." },
			"another provider":    func(e *Event) { e.Provider = "sendy" },
			"another sender":      func(e *Event) { e.Sender = "Other" },
			"other request bytes": func(e *Event) { e.Fingerprint = "abd" },
		} {
			if want == "other request bytes" {
				// As stored: the bare sha256 without keys, else keyed.
				p := protectorOf(l)
				want = fmt.Sprintf("other request bytes (stored %s, now %s)", short(p.fingerprint("abc")), short(p.fingerprint("abd")))
			}
			other := event
			mutate(&other)
			c, err := l.Claim(ctx, other)
			require.ErrorIs(t, err, ErrConflict, want)
			require.ErrorContains(t, err, want)
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
		if dbClock {
			// The store's clock, in the order the rows were written.
			require.False(t, got[0].StartedAt.IsZero())
			require.False(t, got[1].StartedAt.Before(got[0].StartedAt))
			require.False(t, got[2].StartedAt.Before(got[1].StartedAt))
			for i, want := range []*Attempt{&a1, &a2, &resend} {
				want.StartedAt = got[i].StartedAt
				if !want.EndedAt.IsZero() {
					require.False(t, got[i].EndedAt.Before(got[i].StartedAt))
					want.EndedAt = got[i].EndedAt
				}
			}
		}
		for i, want := range []*Attempt{&a1, &a2, &resend} {
			require.True(t, protectorOf(l).sameFingerprint(got[i].Fingerprint, want.Fingerprint))
			want.Fingerprint = protectorOf(l).fingerprint(want.Fingerprint) // as stored
		}
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
		e, err := l.Settle(ctx, event.Key, "Delivered", "delivered", "m-1", t0.Add(time.Minute))
		require.NoError(t, err)
		require.Equal(t, "Delivered", e.Outcome)
		e, err = l.Event(ctx, event.Key)
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

		_, err = l.Settle(ctx, "other", "Delivered", "", "", t0)
		require.ErrorIs(t, err, ErrNotFound)
		newer := again
		newer.Fingerprint = "planned-by-a-newer-build"
		c, err = l.Claim(ctx, newer)
		require.NoError(t, err, "a settled event sends nothing more: other bytes are no conflict")
		require.True(t, c.Event.Settled())
		_, err = l.Event(ctx, "other")
		require.True(t, errors.Is(err, ErrNotFound))
	})
}

// fencingAndIdentity: an attempt of a run that no longer holds the event
// is refused; a retried write of the same attempt is not; the identity
// stays with the store; many goroutines claim and attempt at once.
func fencingAndIdentity(t *testing.T, open func(t *testing.T) Ledger) {
	ctx := context.Background()
	e := Event{Key: "order-2-shipped", Provider: "bird", Recipient: "+31612345678", Text: "t", Fingerprint: "f", WorkflowID: "order-2-shipped", RunID: "run-1", CreatedAt: time.Unix(0, 0).UTC()}

	t.Run("an old run's attempt is fenced off", func(t *testing.T) {
		t.Parallel()
		l := open(t)
		_, err := l.Claim(ctx, e)
		require.NoError(t, err)
		now, err := l.Now(ctx)
		require.NoError(t, err)
		old := Attempt{EventKey: e.Key, SendKey: e.Key, RunID: "run-1", Number: 1, Fingerprint: "f", StartedAt: now}
		require.NoError(t, l.BeginAttempt(ctx, old))
		require.NoError(t, l.BeginAttempt(ctx, old), "a retried write of the same attempt")

		next := e
		next.RunID = "run-2"
		_, err = l.Claim(ctx, next)
		require.NoError(t, err)
		zombie := old
		zombie.Number = 2
		err = l.BeginAttempt(ctx, zombie)
		require.ErrorIs(t, err, ErrFenced)
		require.ErrorContains(t, err, "belongs to run run-1, but run run-2 holds the event now")
		fresh := Attempt{EventKey: e.Key, SendKey: e.Key, RunID: "run-2", Number: 1, Fingerprint: "f", StartedAt: now}
		require.NoError(t, l.BeginAttempt(ctx, fresh))
		got, err := l.Attempts(ctx, e.Key)
		require.NoError(t, err)
		require.Len(t, got, 2, "the zombie wrote nothing")

		unknown := Attempt{EventKey: "never-claimed", SendKey: "never-claimed", RunID: "r", Number: 1}
		require.ErrorIs(t, l.BeginAttempt(ctx, unknown), ErrNotFound)
	})

	t.Run("the identity is made once and kept", func(t *testing.T) {
		t.Parallel()
		l := open(t)
		require.NotEmpty(t, l.Identity())
		require.NotEmpty(t, l.Describe())
	})

	t.Run("many goroutines claim and attempt at once", func(t *testing.T) {
		t.Parallel()
		l := open(t)
		var created atomic.Int32
		var wg sync.WaitGroup
		errs := make(chan error, 200)
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := l.Claim(ctx, e)
				if err != nil {
					errs <- err
					return
				}
				if c.Created {
					created.Add(1)
				}
				now, _ := l.Now(ctx)
				for n := 1; n <= 5; n++ {
					// Every goroutine writes the same five attempts: each
					// lands once.
					if err := l.BeginAttempt(ctx, Attempt{EventKey: e.Key, SendKey: e.Key, RunID: "run-1", Number: n, Fingerprint: "f", StartedAt: now}); err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.EqualValues(t, 1, created.Load())
		got, err := l.Attempts(ctx, e.Key)
		require.NoError(t, err)
		require.Len(t, got, 5)
	})
}

// Two runs (or a retried activity racing a zombie) settle the same event:
// the outcome that knows most of a message that went out stays (Rank),
// the first among equals; each caller learns what was stored, never less
// than its own; a later settle of a lower rank changes nothing, and one
// without a message id never replaces an outcome.
func firstSettleWins(t *testing.T, open func(t *testing.T) Ledger) {
	ctx := context.Background()
	l := open(t)
	e := Event{Key: "order-1-shipped", Provider: "bird", Recipient: "+31612345678", Text: "t", Fingerprint: "f", RunID: "r", CreatedAt: time.Unix(0, 0).UTC()}
	_, err := l.Claim(ctx, e)
	require.NoError(t, err)
	var wg sync.WaitGroup
	outcomes := []string{"Delivered", "Cancelled", "Failed", "Accepted"}
	stored := make([]Event, len(outcomes))
	for i, o := range outcomes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			stored[i], err = l.Settle(ctx, e.Key, o, "by "+o, "m-"+o, time.Unix(int64(i+1), 0))
			require.NoError(t, err)
		}()
	}
	wg.Wait()
	for i, s := range stored {
		require.GreaterOrEqual(t, Rank(s.Outcome), Rank(outcomes[i]), "a caller never sees less than it settled")
		require.Equal(t, "m-"+s.Outcome, s.MessageID)
	}
	final, err := l.Event(ctx, e.Key)
	require.NoError(t, err)
	require.Equal(t, "Delivered", final.Outcome, "the delivered message stays, whatever the order")
	require.Equal(t, "m-Delivered", final.MessageID)
	again, err := l.Settle(ctx, e.Key, "Failed", "late", "", time.Unix(99, 0))
	require.NoError(t, err)
	require.Equal(t, "Delivered", again.Outcome, "a later settle changes nothing")

	// Failed first, then a run that learns of a live message: it
	// corrects the record, which keeps what it replaced.
	e.Key = "order-2-shipped"
	_, err = l.Claim(ctx, e)
	require.NoError(t, err)
	first, err := l.Settle(ctx, e.Key, "Failed", "no message found", "", time.Unix(1, 0))
	require.NoError(t, err)
	require.Equal(t, "Failed", first.Outcome)
	noID, err := l.Settle(ctx, e.Key, "Unconfirmed", "a message may exist", "", time.Unix(2, 0))
	require.NoError(t, err)
	require.Equal(t, "Failed", noID.Outcome, "an outcome without a message id replaces nothing")
	later, err := l.Settle(ctx, e.Key, "Unconfirmed", "message m-9 turned up", "m-9", time.Unix(3, 0))
	require.NoError(t, err)
	require.Equal(t, "Unconfirmed", later.Outcome)
	require.Equal(t, "m-9", later.MessageID)
	require.Equal(t, "message m-9 turned up (replaces Failed: no message found)", later.Reason)
	same, err := l.Settle(ctx, e.Key, "Accepted", "m-10 accepted", "m-10", time.Unix(4, 0))
	require.NoError(t, err)
	require.Equal(t, "Unconfirmed", same.Outcome, "among equals the first stays")
}

func TestSQLiteFirstSettleWins(t *testing.T) {
	t.Parallel()
	firstSettleWins(t, openSQLite)
}

// protectorOf is the store's protector (nil keys: values as given).
func protectorOf(l Ledger) *protector {
	switch s := l.(type) {
	case *SQLite:
		return s.protect
	case *Postgres:
		return s.protect
	}
	panic(fmt.Sprintf("a ledger of type %T", l))
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
	contract(t, openSQLite, false)
	fencingAndIdentity(t, openSQLite)
}

func TestSQLiteIdentityOutlivesReopening(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ledger.db")
	a, err := OpenSQLite(context.Background(), path)
	require.NoError(t, err)
	id := a.Identity()
	require.NoError(t, a.Close())
	b, err := OpenSQLite(context.Background(), path)
	require.NoError(t, err)
	defer func() { _ = b.Close() }()
	require.Equal(t, id, b.Identity())
	other := openSQLite(t)
	require.NotEqual(t, id, other.Identity(), "another file is another ledger")
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

func openPostgres(t *testing.T) Ledger {
	t.Helper()
	l, err := OpenPostgres(context.Background(), pgtest.Database(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func TestPostgresLedger(t *testing.T) {
	t.Parallel()
	contract(t, openPostgres, true)
	fencingAndIdentity(t, openPostgres)
}

func TestPostgresFirstSettleWins(t *testing.T) {
	t.Parallel()
	firstSettleWins(t, openPostgres)
}

// Several workers starting at once against a new database migrate once
// (under the advisory lock) and share one identity.
func TestPostgresWorkersStartingAtOnceMigrateOnce(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Database(t)
	ids := make([]string, 6)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := OpenPostgres(context.Background(), dsn)
			require.NoError(t, err)
			ids[i] = l.Identity()
			_ = l.Close()
		}()
	}
	wg.Wait()
	for _, id := range ids {
		require.Equal(t, ids[0], id)
	}
	l, err := OpenPostgres(context.Background(), dsn)
	require.NoError(t, err)
	defer func() { _ = l.Close() }()
	require.NotContains(t, l.Describe(), "secret")
	_, err = OpenPostgres(context.Background(), "postgres://nobody:secret@127.0.0.1:1/nothing")
	require.Error(t, err)
	require.NotContains(t, err.Error(), "secret", "the password never reaches an error")
}

// Record keeps every message id and finding any run of the event
// reported, in order, once each, settled or not.
func recordKeepsEverything(t *testing.T, open func(t *testing.T) Ledger) {
	ctx := context.Background()
	l := open(t)
	e := Event{Key: "order-3-shipped", Provider: "bird", Recipient: "+31612345678", Text: "t", Fingerprint: "f", RunID: "r", CreatedAt: time.Unix(0, 0).UTC()}
	_, err := l.Claim(ctx, e)
	require.NoError(t, err)
	_, err = l.Settle(ctx, e.Key, "Delivered", "delivered", "m-1", time.Unix(1, 0))
	require.NoError(t, err)
	got, err := l.Record(ctx, e.Key, []string{"m-1", "m-2"}, []string{FindingDuplicateSend})
	require.NoError(t, err)
	require.Equal(t, []string{"m-1", "m-2"}, got.MessageIDs)
	got, err = l.Record(ctx, e.Key, []string{"m-2", "m-3"}, []string{FindingOutcomeUnknown, FindingDuplicateSend})
	require.NoError(t, err)
	require.Equal(t, []string{"m-1", "m-2", "m-3"}, got.MessageIDs)
	require.Equal(t, []string{FindingDuplicateSend, FindingOutcomeUnknown}, got.Findings)
	read, err := l.Event(ctx, e.Key)
	require.NoError(t, err)
	require.Equal(t, got.MessageIDs, read.MessageIDs)
	require.Equal(t, got.Findings, read.Findings)
	require.Equal(t, "Delivered", read.Outcome, "recording changes no outcome")
	_, err = l.Record(ctx, "no-such-event", []string{"m-1"}, nil)
	require.ErrorIs(t, err, ErrNotFound)
}

func TestSQLiteRecordKeepsEverything(t *testing.T) {
	t.Parallel()
	recordKeepsEverything(t, openSQLite)
}

func TestPostgresRecordKeepsEverything(t *testing.T) {
	t.Parallel()
	recordKeepsEverything(t, openPostgres)
}

// Outranks is the rule Settle's statement applies.
func TestOutranks(t *testing.T) {
	for _, c := range []struct {
		outcome, id, stored, storedID string
		want                          bool
	}{
		{"Failed", "", "", "", true},
		{"Delivered", "m-1", "Unconfirmed", "m-1", true},
		{"Unconfirmed", "m-2", "Failed", "", true},
		{"Unconfirmed", "m-1", "Cancelled", "m-1", false},
		{"Unconfirmed", "", "Failed", "", false},
		{"Accepted", "m-2", "Unconfirmed", "m-1", false},
		{"Failed", "", "Delivered", "m-1", false},
	} {
		require.Equal(t, c.want, Outranks(c.outcome, c.id, c.stored, c.storedID), "%+v", c)
	}
}

// A ledger that cannot be opened is a nil Ledger beside the error, so a
// caller's cleanup (if l != nil { l.Close() }) does not panic on a nil
// store in a non-nil interface and hide why it failed: a wrong
// PostgreSQL password became a crash loop with no reason in compose.
func TestALedgerThatCannotOpenIsNil(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	notADir := filepath.Join(t.TempDir(), "a-file")
	require.NoError(t, os.WriteFile(notADir, nil, 0o600))
	for _, addr := range []string{
		"postgres://nobody@127.0.0.1:1/none?connect_timeout=2", // nothing listens on port 1
		"postgres://%zz",                    // not a DSN
		filepath.Join(notADir, "ledger.db"), // under a file
	} {
		l, err := Open(ctx, addr)
		require.Error(t, err, addr)
		require.True(t, l == nil, "%s: a failed Open returned a non-nil Ledger (%T)", addr, l)
	}
}

// A SQLite ledger, which holds recipients (sealed or not) and message
// ids, is readable by its owner alone, its WAL too, even where the file
// existed with a wider mode.
func TestASQLiteLedgerIsReadableByItsOwnerOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "state")
	path := filepath.Join(dir, "ledger.db")
	l, err := OpenSQLite(ctx, path)
	require.NoError(t, err)
	_, err = l.Now(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	for _, p := range []string{path, dir} {
		st, err := os.Stat(p)
		require.NoError(t, err)
		require.Zero(t, st.Mode().Perm()&0o077, "%s is %v", p, st.Mode().Perm())
	}
	require.NoError(t, os.Chmod(path, 0o644))
	l, err = OpenSQLite(ctx, path)
	require.NoError(t, err)
	_, err = l.Claim(ctx, Event{Key: "k", Provider: "bird", Recipient: "+31612345678", Text: "t", Fingerprint: "f", WorkflowID: "k", RunID: "r", CreatedAt: time.Now()})
	require.NoError(t, err)
	matches, err := filepath.Glob(path + "*")
	require.NoError(t, err)
	for _, p := range matches {
		st, err := os.Stat(p)
		require.NoError(t, err)
		require.Zero(t, st.Mode().Perm()&0o077, "%s is %v", p, st.Mode().Perm())
	}
	require.NoError(t, l.Close())
}

// ":memory:" is SQLite's ledger in memory (the simulation's), not a file
// to create.
func TestAnInMemoryLedgerMakesNoFile(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	l, err := OpenSQLite(context.Background(), ":memory:")
	require.NoError(t, err)
	require.NoError(t, l.Close())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "files made for a ledger in memory")
}
