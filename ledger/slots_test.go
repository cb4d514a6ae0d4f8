package ledger

import (
	"context"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/internal/pgtest"
)

// slotTimes reads the slots recorded for name, oldest first.
func slotTimes(t *testing.T, l Ledger, name string) []time.Time {
	t.Helper()
	var out []time.Time
	switch s := l.(type) {
	case *SQLite:
		rows, err := s.db.Query(`SELECT at FROM request_slots WHERE name = ? ORDER BY at`, name)
		require.NoError(t, err)
		defer func() { _ = rows.Close() }()
		for rows.Next() {
			var ns int64
			require.NoError(t, rows.Scan(&ns))
			out = append(out, time.Unix(0, ns))
		}
		require.NoError(t, rows.Err())
	case *Postgres:
		rows, err := s.pool.Query(context.Background(), `SELECT at FROM request_slots WHERE name = $1 ORDER BY at`, name)
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			var at time.Time
			require.NoError(t, rows.Scan(&at))
			out = append(out, at)
		}
		require.NoError(t, rows.Err())
	}
	return out
}

// slotsHoldTheLimit: eight takers on two handles of one store (two
// workers of a fleet) ask for slots as fast as they are given for longer
// than a window: no window holds more than the limit, every slot given
// is recorded, the limit is used, and a refusal says how long to wait.
func slotsHoldTheLimit(t *testing.T, a, b Ledger) {
	const (
		limit  = 10
		window = time.Second
		name   = "sendy"
	)
	ctx := context.Background()
	end := time.Now().Add(window * 3 / 2) // within the rows' pruning horizon of two windows
	var mu sync.Mutex
	given, refused := 0, 0
	var wg sync.WaitGroup
	for i := range 8 {
		l := a
		if i%2 == 1 {
			l = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				wait, err := l.TakeSlot(ctx, name, limit, window)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if wait == 0 {
					given++
				} else {
					refused++
					if wait > window {
						t.Errorf("a refusal says to wait %s, more than the window", wait)
					}
				}
				mu.Unlock()
				time.Sleep(wait)
			}
		}()
	}
	wg.Wait()
	at := slotTimes(t, a, name)
	require.Len(t, at, given, "every slot given is recorded")
	require.GreaterOrEqual(t, given, limit, "the limit was used")
	require.Positive(t, refused, "takers were refused once the limit was used")
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	for i := range at {
		n := sort.Search(len(at), func(j int) bool { return !at[j].Before(at[i].Add(window)) }) - i
		require.LessOrEqual(t, n, limit, "slots in the window from %s", at[i].Format(time.StampMicro))
	}
	t.Logf("%d slots given, %d takes refused, in %s", given, refused, window*3/2)

	// Another name has its own slots; a take that asks for nothing is refused.
	wait, err := a.TakeSlot(ctx, "bird", 1, window)
	require.NoError(t, err)
	require.Zero(t, wait)
	_, err = a.TakeSlot(ctx, name, 0, window)
	require.ErrorContains(t, err, "a limit of at least 1")
}

func TestSQLiteSlotsHoldTheLimitAcrossProcesses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ledger.db")
	a, err := OpenSQLite(context.Background(), path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	b, err := OpenSQLite(context.Background(), path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	slotsHoldTheLimit(t, a, b)
}

func TestPostgresSlotsHoldTheLimitAcrossWorkers(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Database(t)
	a, err := OpenPostgres(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	b, err := OpenPostgres(context.Background(), dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	slotsHoldTheLimit(t, a, b)
}
