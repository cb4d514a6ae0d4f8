package ledger

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/codec"
	"github.com/acme/smsorch/internal/pgtest"
)

func keys(t *testing.T, ids ...string) *codec.Keyring {
	t.Helper()
	var specs []string
	for _, id := range ids {
		k, err := codec.NewKey(id)
		require.NoError(t, err)
		specs = append(specs, k)
	}
	r, err := codec.ParseKeys(strings.Join(specs, ","))
	require.NoError(t, err)
	return r
}

// Every behaviour of the ledger holds with its personal fields sealed.
func TestSQLiteLedgerSealed(t *testing.T) {
	t.Parallel()
	ring := keys(t, "k1")
	open := func(t *testing.T) Ledger {
		l, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "ledger.db"), WithKeys(ring))
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	contract(t, open, false)
	fencingAndIdentity(t, open)
	firstSettleWins(t, open)
}

func TestPostgresLedgerSealed(t *testing.T) {
	t.Parallel()
	ring := keys(t, "k1")
	open := func(t *testing.T) Ledger {
		l, err := OpenPostgres(context.Background(), pgtest.Database(t), WithKeys(ring))
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	contract(t, open, true)
	firstSettleWins(t, open)
}

// personalData: a store's recipients and texts never stand in plain in
// it (searched byte for byte: the SQLite file and its WAL, every row of
// every Postgres table as text), the request fingerprint is keyed, a
// claim compares what was sealed, a rotated ring still opens and
// compares, rows written in plain are sealed when keys are given, and
// after the retention the personal fields are gone while the key still
// sends nothing again.
func personalData(t *testing.T, open func(t *testing.T, where string, opts ...Option) Ledger, fresh func(t *testing.T) string, dump func(t *testing.T, where string) string) {
	ctx := context.Background()
	const (
		to   = "+31612345678"
		text = "Your code is 482913"
		fp   = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	)
	event := Event{Key: "otp-4242-1", Provider: "bird", Recipient: to, Text: text, Fingerprint: fp, WorkflowID: "otp-4242-1", RunID: "run-1", CreatedAt: time.Now().UTC()}
	plainIn := func(t *testing.T, where string) {
		t.Helper()
		raw := dump(t, where)
		require.NotEmpty(t, raw)
		for _, s := range []string{to, strings.TrimPrefix(to, "+"), text, "482913", fp} {
			require.NotContains(t, raw, s, "%q stands in plain in the ledger", s)
		}
	}

	t.Run("sealed as written, keyed fingerprints, compared in plain", func(t *testing.T) {
		t.Parallel()
		where := fresh(t)
		first := mustKey(t, "2026-11")
		ring, err := codec.ParseKeys(first)
		require.NoError(t, err)
		l := open(t, where, WithKeys(ring))
		c, err := l.Claim(ctx, event)
		require.NoError(t, err)
		require.Equal(t, to, c.Event.Recipient, "read back in plain")
		require.Equal(t, text, c.Event.Text)
		require.True(t, strings.HasPrefix(c.Event.Fingerprint, "hmac:2026-11:"), c.Event.Fingerprint)
		require.NoError(t, l.BeginAttempt(ctx, Attempt{EventKey: event.Key, SendKey: event.Key, RunID: "run-1", Number: 1, Fingerprint: fp, StartedAt: time.Now()}))
		again := event
		again.RunID = "run-2"
		_, err = l.Claim(ctx, again)
		require.NoError(t, err, "the same message again")
		other := event
		other.Text = "Your code is 000000"
		_, err = l.Claim(ctx, other)
		require.ErrorIs(t, err, ErrConflict)
		require.ErrorContains(t, err, "text")
		bytes := event
		bytes.Fingerprint = strings.Repeat("0", 64)
		_, err = l.Claim(ctx, bytes)
		require.ErrorContains(t, err, "request bytes")
		require.NotContains(t, err.Error(), fp[:12], "the conflict names the keyed fingerprint, not the bare one")
		plainIn(t, where)
		require.NoError(t, l.Close())

		// A rotated ring: a new key seals, the old one still opens and
		// compares.
		rotated, err := codec.ParseKeys(mustKey(t, "2026-12") + "," + first)
		require.NoError(t, err)
		l = open(t, where, WithKeys(rotated))
		e, err := l.Event(ctx, event.Key)
		require.NoError(t, err)
		require.Equal(t, to, e.Recipient)
		_, err = l.Claim(ctx, event)
		require.NoError(t, err, "the same message under the rotated ring")
		require.NoError(t, l.Close())

		// Without the keys a worker cannot read it; a reading tool sees it sealed.
		l = open(t, where)
		_, err = l.Event(ctx, event.Key)
		require.ErrorIs(t, err, ErrSealed)
		require.NoError(t, l.Close())
		l = open(t, where, HideSealed())
		e, err = l.Event(ctx, event.Key)
		require.NoError(t, err)
		require.Equal(t, Hidden, e.Recipient)
		require.Equal(t, Hidden, e.Text)
		require.NoError(t, l.Close())
	})

	t.Run("rows written in plain are sealed when keys are given", func(t *testing.T) {
		t.Parallel()
		where := fresh(t)
		l := open(t, where)
		_, err := l.Claim(ctx, event)
		require.NoError(t, err)
		require.NoError(t, l.BeginAttempt(ctx, Attempt{EventKey: event.Key, SendKey: event.Key, RunID: "run-1", Number: 1, Fingerprint: fp, StartedAt: time.Now()}))
		require.Contains(t, dump(t, where), text, "without keys the text is stored as given")
		require.NoError(t, l.Close())

		ring := keys(t, "k1")
		// A reading tool with the keys reads them and rewrites nothing.
		l = open(t, where, WithKeys(ring), ForReading())
		e, err := l.Event(ctx, event.Key)
		require.NoError(t, err)
		require.Equal(t, text, e.Text)
		require.NoError(t, l.Close())
		require.Contains(t, dump(t, where), text, "a reading tool left the row to the workers")

		l = open(t, where, WithKeys(ring))
		plainIn(t, where)
		e, err = l.Event(ctx, event.Key)
		require.NoError(t, err)
		require.Equal(t, to, e.Recipient)
		require.Equal(t, text, e.Text)
		_, err = l.Claim(ctx, event)
		require.NoError(t, err, "the migrated fingerprint still compares")
		attempts, err := l.Attempts(ctx, event.Key)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(attempts[0].Fingerprint, "hmac:k1:"))
		require.NoError(t, l.Close())
		l = open(t, where, WithKeys(ring))
		_, err = l.Event(ctx, event.Key)
		require.NoError(t, err, "sealed once: opening again changes nothing")
	})

	t.Run("after the retention the personal fields are gone, and the key still sends nothing", func(t *testing.T) {
		t.Parallel()
		where := fresh(t)
		l := open(t, where, WithKeys(keys(t, "k1")))
		open2 := event
		open2.Key, open2.WorkflowID = "otp-4242-2", "otp-4242-2"
		for _, e := range []Event{event, open2} {
			_, err := l.Claim(ctx, e)
			require.NoError(t, err)
			require.NoError(t, l.BeginAttempt(ctx, Attempt{EventKey: e.Key, SendKey: e.Key, RunID: "run-1", Number: 1, Fingerprint: fp, StartedAt: time.Now()}))
		}
		now, err := l.Now(ctx)
		require.NoError(t, err)
		_, err = l.Settle(ctx, event.Key, "Delivered", "delivered", "msg-1", now)
		require.NoError(t, err)
		n, err := l.Purge(ctx, now.Add(-time.Hour))
		require.NoError(t, err)
		require.Zero(t, n, "settled within the retention: kept")
		n, err = l.Purge(ctx, now.Add(time.Second))
		require.NoError(t, err)
		require.EqualValues(t, 1, n, "only the settled event")
		e, err := l.Event(ctx, event.Key)
		require.NoError(t, err)
		require.True(t, e.Purged())
		require.Equal(t, "Delivered", e.Outcome)
		require.Equal(t, "msg-1", e.MessageID, "ids, times and outcomes stay for the audit")
		attempts, err := l.Attempts(ctx, event.Key)
		require.NoError(t, err)
		require.Len(t, attempts, 1)
		require.Empty(t, attempts[0].Fingerprint)
		c, err := l.Claim(ctx, event)
		require.NoError(t, err, "the same key after the retention: found settled")
		require.False(t, c.Created)
		require.True(t, c.Event.Settled())
		kept, err := l.Event(ctx, open2.Key)
		require.NoError(t, err)
		require.Equal(t, to, kept.Recipient, "an open event keeps its fields")
		raw := dump(t, where)
		require.Contains(t, raw, "msg-1")
	})

	t.Run("a purge under a ring without the sealing key leaves the event for one that has it", func(t *testing.T) {
		t.Parallel()
		where := fresh(t)
		k1, k2 := mustKey(t, "k1"), mustKey(t, "k2")
		ring := func(specs ...string) *codec.Keyring {
			r, err := codec.ParseKeys(strings.Join(specs, ","))
			require.NoError(t, err)
			return r
		}
		l := open(t, where, WithKeys(ring(k1)))
		_, err := l.Claim(ctx, event)
		require.NoError(t, err)
		now, err := l.Now(ctx)
		require.NoError(t, err)
		_, err = l.Settle(ctx, event.Key, "Delivered", "delivered", "msg-1", now)
		require.NoError(t, err)
		require.NoError(t, l.Close())

		other := event
		other.RunID, other.Text, other.Fingerprint = "run-2", "Your code is 000000", strings.Repeat("b", 64)
		l = open(t, where, WithKeys(ring(k2))) // a worker given only the new key
		n, err := l.Purge(ctx, now.Add(time.Second))
		require.Zero(t, n)
		require.ErrorContains(t, err, "left 1 settled events")
		require.ErrorContains(t, err, `key id "k1"`, "names the key it lacks")
		require.NoError(t, l.Close())

		l = open(t, where, WithKeys(ring(k2, k1))) // one that holds it
		n, err = l.Purge(ctx, now.Add(time.Second))
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
		e, err := l.Event(ctx, event.Key)
		require.NoError(t, err)
		require.True(t, e.Purged())
		_, err = l.Claim(ctx, other)
		require.ErrorIs(t, err, ErrConflict, "purged where the key was: another message under the key still conflicts")
	})
}

func mustKey(t *testing.T, id string) string {
	t.Helper()
	k, err := codec.NewKey(id)
	require.NoError(t, err)
	return k
}

func TestSQLitePersonalData(t *testing.T) {
	t.Parallel()
	personalData(t,
		func(t *testing.T, path string, opts ...Option) Ledger {
			l, err := OpenSQLite(context.Background(), path, opts...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			return l
		},
		func(t *testing.T) string { return filepath.Join(t.TempDir(), "ledger.db") },
		func(t *testing.T, path string) string {
			var all strings.Builder
			for _, f := range []string{path, path + "-wal"} {
				b, err := os.ReadFile(f)
				if err == nil {
					all.Write(b)
				}
			}
			return all.String()
		})
}

func TestPostgresPersonalData(t *testing.T) {
	t.Parallel()
	personalData(t,
		func(t *testing.T, dsn string, opts ...Option) Ledger {
			l, err := OpenPostgres(context.Background(), dsn, opts...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = l.Close() })
			return l
		},
		func(t *testing.T) string { return pgtest.Database(t) },
		func(t *testing.T, dsn string) string {
			l, err := OpenPostgres(context.Background(), dsn, HideSealed())
			require.NoError(t, err)
			defer func() { _ = l.Close() }()
			var all strings.Builder
			for _, table := range []string{"events", "attempts", "switches"} {
				rows, err := l.pool.Query(context.Background(), `SELECT row_to_json(t)::text FROM `+table+` t`)
				require.NoError(t, err)
				for rows.Next() {
					var s string
					require.NoError(t, rows.Scan(&s))
					all.WriteString(s)
				}
				require.NoError(t, rows.Err())
			}
			return all.String()
		})
}
