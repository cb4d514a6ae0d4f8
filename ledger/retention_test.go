package ledger

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/codec"
)

// Before the purge a second message under a used key is a conflict (the
// starter's promise: "another recipient or text is a ConflictError, never
// a silent attach"), and after it too: Temporal forgets the run at about
// the same time (retention from close, the ledger from settle), so the
// ledger's keyed fingerprint of the message is what still detects it.
func TestAPurgedEventStillRefusesAnotherMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, err := OpenSQLite(ctx, filepath.Join(t.TempDir(), "ledger.db"), WithKeys(keys(t, "k1")))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	e := Event{Key: "order-1-shipped", Provider: "bird", Recipient: "+31612345678", Text: "Order 1 has shipped.",
		Fingerprint: strings.Repeat("a", 64), WorkflowID: "order-1-shipped", RunID: "run-1", CreatedAt: time.Now().UTC()}
	_, err = l.Claim(ctx, e)
	require.NoError(t, err)
	now, err := l.Now(ctx)
	require.NoError(t, err)
	_, err = l.Settle(ctx, e.Key, "Delivered", "delivered", "msg-1", now)
	require.NoError(t, err)

	other := e
	other.RunID, other.Recipient, other.Text, other.Fingerprint = "run-2", "+31687654321", "Your refund is on its way.", strings.Repeat("b", 64)
	_, err = l.Claim(ctx, other)
	require.ErrorIs(t, err, ErrConflict, "control: before the purge another message conflicts")

	n, err := l.Purge(ctx, now.Add(time.Second))
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	_, err = l.Claim(ctx, other)
	require.ErrorIs(t, err, ErrConflict, "after the purge another message under the key must still conflict")
}

// Rows are sealed again under the current key when the ledger opens with
// a rotated ring. An event that never settles (a terminated run) is never
// purged: without this, dropping the old key would leave its row closed
// to every later claim of the key (ErrUnknownKey, retried for ever).
func TestRotationReSealsLedgerRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	oldSpec, newSpec := mustKey(t, "2026-05"), mustKey(t, "2026-11")
	oldRing, err := codec.ParseKeys(oldSpec)
	require.NoError(t, err)
	rotated, err := codec.ParseKeys(newSpec + "," + oldSpec)
	require.NoError(t, err)
	newOnly, err := codec.ParseKeys(newSpec)
	require.NoError(t, err)

	e := Event{Key: "order-2-shipped", Provider: "bird", Recipient: "+31612345678", Text: "Order 2 has shipped.",
		Fingerprint: strings.Repeat("c", 64), WorkflowID: "order-2-shipped", RunID: "run-1", CreatedAt: time.Now().UTC()}
	l, err := OpenSQLite(ctx, path, WithKeys(oldRing))
	require.NoError(t, err)
	_, err = l.Claim(ctx, e) // its run is then terminated: never settled
	require.NoError(t, err)
	require.NoError(t, l.Close())

	l, err = OpenSQLite(ctx, path, WithKeys(rotated)) // the rotation, kept past the ledger retention
	require.NoError(t, err)
	now, err := l.Now(ctx)
	require.NoError(t, err)
	_, err = l.Purge(ctx, now.Add(1000*time.Hour))
	require.NoError(t, err)
	require.NoError(t, l.Close())

	l, err = OpenSQLite(ctx, path, WithKeys(newOnly)) // the old key removed
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	got, err := l.Event(ctx, e.Key)
	require.NoError(t, err, "rows must be re-sealed under the current key while the old one is still in the ring")
	require.Equal(t, e.Recipient, got.Recipient)
	again := e
	again.RunID = "run-2"
	_, err = l.Claim(ctx, again)
	require.NoError(t, err)
}
