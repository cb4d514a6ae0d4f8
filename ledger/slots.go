package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The request slots of a fleet: one row for each request a worker was
// allowed to make to a provider, kept for one window. Whatever order the
// workers' takes reach the store in, a slot is recorded only when fewer
// than limit were recorded at or after its own time less the window, so
// no window holds more than limit (the take that was recorded last in a
// window counted every other one in it).

// checkSlot refuses a take that asks for nothing.
func checkSlot(name string, limit int, window time.Duration) error {
	if name == "" || limit < 1 || window <= 0 {
		return fmt.Errorf("ledger: a request slot needs a name, a limit of at least 1 and a window (got %q, %d, %s)", name, limit, window)
	}
	return nil
}

// TakeSlot implements Ledger. The first statement writes, so the
// transaction holds SQLite's write lock from its start (every process
// of the host waits its turn) and reads what the others committed.
func (s *SQLite) TakeSlot(ctx context.Context, name string, limit int, window time.Duration) (time.Duration, error) {
	if err := checkSlot(name, limit, window); err != nil {
		return 0, err
	}
	wait, err := s.takeSlot(ctx, name, limit, window)
	if err != nil {
		return 0, fmt.Errorf("ledger: take a request slot for %s: %w", name, err)
	}
	return wait, nil
}

func (s *SQLite) takeSlot(ctx context.Context, name string, limit int, window time.Duration) (time.Duration, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `DELETE FROM request_slots WHERE name = ? AND at <= ?`, name, s.clock().Add(-2*window).UnixNano()); err != nil {
		return 0, err
	}
	now := s.clock().UnixNano()
	since := now - window.Nanoseconds()
	res, err := tx.ExecContext(ctx, `INSERT INTO request_slots (name, at) SELECT ?, ?
		WHERE (SELECT count(*) FROM request_slots WHERE name = ? AND at > ?) < ?`, name, now, name, since, limit)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	if n == 1 {
		return 0, tx.Commit()
	}
	var oldest int64
	if err := tx.QueryRowContext(ctx, `SELECT min(at) FROM request_slots WHERE name = ? AND at > ?`, name, since).Scan(&oldest); err != nil {
		return 0, err
	}
	return max(time.Duration(oldest-since), time.Millisecond), nil
}

// slotLock is the advisory lock a name's takes run under: one at a
// time, on the database's clock, so the times recorded follow the order
// of the takes.
const slotLock = `SELECT pg_advisory_xact_lock(hashtextextended('smsorch request slots ' || $1, 0))`

// TakeSlot implements Ledger on the database's clock.
func (p *Postgres) TakeSlot(ctx context.Context, name string, limit int, window time.Duration) (time.Duration, error) {
	if err := checkSlot(name, limit, window); err != nil {
		return 0, err
	}
	var wait time.Duration
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, slotLock, name); err != nil {
			return err
		}
		var now time.Time
		if err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
			return err
		}
		since := now.Add(-window)
		if _, err := tx.Exec(ctx, `DELETE FROM request_slots WHERE name = $1 AND at <= $2`, name, now.Add(-2*window)); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO request_slots (name, at) SELECT $1, $2
			WHERE (SELECT count(*) FROM request_slots WHERE name = $1 AND at > $3) < $4`, name, now, since, limit)
		if err != nil || tag.RowsAffected() == 1 {
			return err
		}
		var oldest time.Time
		if err := tx.QueryRow(ctx, `SELECT min(at) FROM request_slots WHERE name = $1 AND at > $2`, name, since).Scan(&oldest); err != nil {
			return err
		}
		wait = max(oldest.Sub(since), time.Millisecond)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("ledger: take a request slot for %s: %w", name, err)
	}
	return wait, nil
}
