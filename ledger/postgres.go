package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/acme/smsorch/internal/logging"
)

// pgMigrations are applied in order, once each, under an advisory lock so
// that several workers starting at once migrate once. Append only.
var pgMigrations = []string{
	1: `
CREATE TABLE ledger_identity (
	id         text PRIMARY KEY,
	created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE events (
	key            text PRIMARY KEY,
	provider       text NOT NULL,
	recipient      text NOT NULL,
	sender         text NOT NULL DEFAULT '',
	body_text      text NOT NULL,
	fingerprint    text NOT NULL,
	workflow_id    text NOT NULL,
	run_id         text NOT NULL,
	created_at     timestamptz NOT NULL,
	outcome        text NOT NULL DEFAULT '',
	outcome_reason text NOT NULL DEFAULT '',
	message_id     text NOT NULL DEFAULT '',
	settled_at     timestamptz
);
CREATE TABLE attempts (
	event_key     text NOT NULL REFERENCES events(key),
	send_key      text NOT NULL,
	run_id        text NOT NULL,
	attempt       integer NOT NULL,
	fingerprint   text NOT NULL,
	started_at    timestamptz NOT NULL DEFAULT now(),
	ended_at      timestamptz,
	outcome       text NOT NULL DEFAULT '',
	http_status   integer NOT NULL DEFAULT 0,
	provider_code text NOT NULL DEFAULT '',
	message_id    text NOT NULL DEFAULT '',
	replay        boolean NOT NULL DEFAULT false,
	reason        text NOT NULL DEFAULT '',
	PRIMARY KEY (send_key, run_id, attempt)
);
CREATE INDEX attempts_by_event ON attempts (event_key, started_at);
-- The window check: the first attempt under a send key.
CREATE INDEX attempts_by_send_key ON attempts (send_key, started_at);
`,
	2: `
CREATE TABLE switches (
	event_key     text NOT NULL REFERENCES events(key),
	send_key      text NOT NULL,
	from_provider text NOT NULL,
	to_provider   text NOT NULL,
	decided_by    text NOT NULL,
	evidence      text NOT NULL,
	at            timestamptz NOT NULL,
	PRIMARY KEY (event_key, send_key)
);
`,
	3: `
ALTER TABLE events ADD COLUMN message_ids text NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN findings text NOT NULL DEFAULT '';
`,
	4: `
CREATE TABLE request_slots (
	name text NOT NULL,
	at   timestamptz NOT NULL
);
CREATE INDEX request_slots_by_name ON request_slots (name, at);
`,
}

// migrationLock is the advisory lock key the migrations run under.
const migrationLock = 0x736d736f7263 // "smsorc"

// Postgres is the ledger on PostgreSQL, shared by every worker of a
// fleet. What several writers need is in the statements, not in
// check-then-insert code: the claim is INSERT … ON CONFLICT then a locked
// read, attempt times come from the database clock, an attempt is written
// only while its run holds the event, and the first settle wins.
type Postgres struct {
	pool    *pgxpool.Pool
	desc    string
	id      string
	protect *protector
}

var _ Ledger = (*Postgres)(nil)

// IsPostgresDSN reports whether a ledger address names PostgreSQL.
func IsPostgresDSN(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// DefaultPostgresPoolSize is the most connections one worker's ledger
// opens, unless its DSN says otherwise (?pool_max_conns=N).
const DefaultPostgresPoolSize = 8

// OpenPostgres connects to the database at dsn and applies the
// migrations it lacks.
func OpenPostgres(ctx context.Context, dsn string, opts ...Option) (*Postgres, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("ledger: the Postgres address is not a valid DSN (write postgres://user@host:5432/dbname): %w", err)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		// pgx's default grows with the host's cores; a fleet's workers
		// share one PostgreSQL, whose default is 100 connections.
		cfg.MaxConns = DefaultPostgresPoolSize
	}
	p := &Postgres{desc: logging.RedactDSN(dsn), protect: o.protector()}
	if p.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, fmt.Errorf("ledger: connect to %s: %w", p.desc, err)
	}
	if err := p.migrate(ctx); err != nil {
		p.pool.Close()
		return nil, err
	}
	if err := p.pool.QueryRow(ctx, `SELECT id FROM ledger_identity`).Scan(&p.id); err != nil {
		p.pool.Close()
		return nil, fmt.Errorf("ledger: read the identity of %s: %w", p.desc, err)
	}
	if err := p.sealExisting(ctx); err != nil {
		p.pool.Close()
		return nil, err
	}
	return p, nil
}

func (p *Postgres) migrate(ctx context.Context) error {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("ledger: connect to %s: %w (is PostgreSQL running, and does the database exist?)", p.desc, err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrationLock); err != nil {
		return fmt.Errorf("ledger: lock %s for migrations: %w", p.desc, err)
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrationLock) }()
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("ledger: %s: %w", p.desc, err)
	}
	var have int
	if err := conn.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
		return fmt.Errorf("ledger: read the schema version: %w", err)
	}
	if have > len(pgMigrations)-1 {
		return fmt.Errorf("ledger: %s has schema version %d, newer than this program knows (%d): run a newer build", p.desc, have, len(pgMigrations)-1)
	}
	for v := have + 1; v < len(pgMigrations); v++ {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, pgMigrations[v]); err != nil {
				return err
			}
			if v == 1 {
				if _, err := tx.Exec(ctx, `INSERT INTO ledger_identity (id) VALUES ($1)`, newIdentity()); err != nil {
					return err
				}
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, v)
			return err
		})
		if err != nil {
			return fmt.Errorf("ledger: migration %d: %w", v, err)
		}
	}
	return nil
}

// Close implements Ledger.
func (p *Postgres) Close() error {
	p.pool.Close()
	return nil
}

// Identity implements Ledger.
func (p *Postgres) Identity() string { return p.id }

// Describe implements Ledger.
func (p *Postgres) Describe() string { return p.desc }

// Now implements Ledger: the database's clock.
func (p *Postgres) Now(ctx context.Context) (time.Time, error) {
	var t time.Time
	if err := p.pool.QueryRow(ctx, `SELECT now()`).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("ledger: read the database clock: %w", err)
	}
	return t, nil
}

const pgEventColumns = `key, provider, recipient, sender, body_text, fingerprint, workflow_id, run_id, created_at,
	outcome, outcome_reason, message_id, settled_at,
	(SELECT MIN(started_at) FROM attempts WHERE send_key = events.key), message_ids, findings`

func (p *Postgres) scanEvent(row pgx.Row, key string) (Event, error) {
	e, err := scanEvent(row, key)
	if err != nil {
		return e, err
	}
	return p.protect.open(e)
}

func scanEvent(row pgx.Row, key string) (Event, error) {
	var e Event
	var settled, first *time.Time
	var ids, findings string
	err := row.Scan(&e.Key, &e.Provider, &e.Recipient, &e.Sender, &e.Text, &e.Fingerprint, &e.WorkflowID, &e.RunID, &e.CreatedAt,
		&e.Outcome, &e.Reason, &e.MessageID, &settled, &first, &ids, &findings)
	e.MessageIDs, e.Findings = splitList(ids), splitList(findings)
	if errors.Is(err, pgx.ErrNoRows) {
		return Event{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if err != nil {
		return Event{}, fmt.Errorf("ledger: read event %s: %w", key, err)
	}
	e.CreatedAt = e.CreatedAt.UTC()
	if settled != nil {
		e.SettledAt = settled.UTC()
	}
	if first != nil {
		e.FirstAttemptAt = first.UTC()
	}
	return e, nil
}

// Claim implements Ledger: INSERT … ON CONFLICT, then the row read under
// a lock, so two workers claiming at once see one record.
func (p *Postgres) Claim(ctx context.Context, e Event) (Claim, error) {
	var out Claim
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		w, err := p.protect.seal(e)
		if err != nil {
			return fmt.Errorf("ledger: claim %s: %w", e.Key, err)
		}
		tag, err := tx.Exec(ctx, `INSERT INTO events (key, provider, recipient, sender, body_text, fingerprint, workflow_id, run_id, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (key) DO NOTHING`,
			w.Key, w.Provider, w.Recipient, w.Sender, w.Text, w.Fingerprint, w.WorkflowID, w.RunID, w.CreatedAt)
		if err != nil {
			return fmt.Errorf("ledger: claim %s: %w", e.Key, err)
		}
		stored, err := p.scanEvent(tx.QueryRow(ctx, `SELECT `+pgEventColumns+` FROM events WHERE key = $1 FOR UPDATE`, e.Key), e.Key)
		if err != nil {
			return err
		}
		out = Claim{Event: stored, Created: tag.RowsAffected() == 1}
		if out.Created {
			return nil
		}
		if err := compare(stored, e, p.protect); err != nil {
			return err
		}
		if !stored.Settled() && stored.RunID != e.RunID {
			if _, err := tx.Exec(ctx, `UPDATE events SET workflow_id = $1, run_id = $2 WHERE key = $3`, e.WorkflowID, e.RunID, e.Key); err != nil {
				return fmt.Errorf("ledger: move %s to run %s: %w", e.Key, e.RunID, err)
			}
			out.Event.WorkflowID, out.Event.RunID = e.WorkflowID, e.RunID
		}
		return nil
	})
	return out, err
}

// Event implements Ledger.
func (p *Postgres) Event(ctx context.Context, key string) (Event, error) {
	return p.scanEvent(p.pool.QueryRow(ctx, `SELECT `+pgEventColumns+` FROM events WHERE key = $1`, key), key)
}

// BeginAttempt implements Ledger. The start time is the database's; the
// row is written only while the event is held by the attempt's run.
func (p *Postgres) BeginAttempt(ctx context.Context, a Attempt) error {
	// FOR SHARE waits for a claim that is moving the event to another run
	// and then reads the moved row: no attempt slips in behind a claim.
	tag, err := p.pool.Exec(ctx, `INSERT INTO attempts (event_key, send_key, run_id, attempt, fingerprint)
		SELECT $1, $2, $3, $4, $5 FROM events WHERE key = $1 AND run_id = $3 FOR SHARE
		ON CONFLICT (send_key, run_id, attempt) DO NOTHING`,
		a.EventKey, a.SendKey, a.RunID, a.Number, p.protect.fingerprint(a.Fingerprint))
	if err != nil {
		return fmt.Errorf("ledger: record the start of attempt %d of %s: %w", a.Number, a.SendKey, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var holder string
	err = p.pool.QueryRow(ctx, `SELECT run_id FROM events WHERE key = $1`, a.EventKey).Scan(&holder)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %s (claim it before sending)", ErrNotFound, a.EventKey)
	}
	if err != nil {
		return fmt.Errorf("ledger: read the holder of %s: %w", a.EventKey, err)
	}
	return fenced(a, holder)
}

// EndAttempt implements Ledger; the end time is the database's.
func (p *Postgres) EndAttempt(ctx context.Context, a Attempt) error {
	tag, err := p.pool.Exec(ctx, `UPDATE attempts SET ended_at = now(), outcome = $1, http_status = $2, provider_code = $3, message_id = $4, replay = $5, reason = $6
		WHERE send_key = $7 AND run_id = $8 AND attempt = $9`,
		a.Outcome, a.HTTPStatus, a.Code, a.MessageID, a.Replay, a.Reason, a.SendKey, a.RunID, a.Number)
	if err != nil {
		return fmt.Errorf("ledger: record the end of attempt %d of %s: %w", a.Number, a.SendKey, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("ledger: attempt %d of %s in run %s was never begun", a.Number, a.SendKey, a.RunID)
	}
	return nil
}

// Attempts implements Ledger.
func (p *Postgres) Attempts(ctx context.Context, eventKey string) ([]Attempt, error) {
	rows, err := p.pool.Query(ctx, `SELECT event_key, send_key, run_id, attempt, fingerprint, started_at, ended_at, outcome, http_status, provider_code, message_id, replay, reason
		FROM attempts WHERE event_key = $1 ORDER BY started_at, send_key, attempt`, eventKey)
	if err != nil {
		return nil, fmt.Errorf("ledger: list attempts of %s: %w", eventKey, err)
	}
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		var a Attempt
		var ended *time.Time
		if err := rows.Scan(&a.EventKey, &a.SendKey, &a.RunID, &a.Number, &a.Fingerprint, &a.StartedAt, &ended, &a.Outcome, &a.HTTPStatus, &a.Code, &a.MessageID, &a.Replay, &a.Reason); err != nil {
			return nil, fmt.Errorf("ledger: read attempts of %s: %w", eventKey, err)
		}
		a.StartedAt = a.StartedAt.UTC()
		if ended != nil {
			a.EndedAt = ended.UTC()
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// FirstAttempt implements Ledger.
func (p *Postgres) FirstAttempt(ctx context.Context, sendKey string) (time.Time, bool, error) {
	var first *time.Time
	if err := p.pool.QueryRow(ctx, `SELECT MIN(started_at) FROM attempts WHERE send_key = $1`, sendKey).Scan(&first); err != nil {
		return time.Time{}, false, fmt.Errorf("ledger: first attempt of %s: %w", sendKey, err)
	}
	if first == nil {
		return time.Time{}, false, nil
	}
	return first.UTC(), true, nil
}

// Settle implements Ledger: the first settle wins unless a later one
// ranks higher (Rank), in the statement.
func (p *Postgres) Settle(ctx context.Context, key, outcome, reason, messageID string, at time.Time) (Event, error) {
	if outcome == "" {
		return Event{}, errors.New("ledger: settle needs an outcome")
	}
	if _, err := p.pool.Exec(ctx, `UPDATE events SET outcome = $1, message_id = $3, settled_at = $4,
		outcome_reason = CASE WHEN outcome = '' THEN $2 ELSE $2 || ' (replaces ' || outcome || ': ' || outcome_reason || ')' END,
		message_ids = CASE WHEN message_id = '' THEN message_ids ELSE trim(message_ids || ' ' || message_id) END
		WHERE key = $5 AND (outcome = '' OR (`+rankSQL+` < $6 AND (message_id <> $3 OR $6 = 2)))`,
		outcome, reason, messageID, at, key, settleRank(outcome, messageID)); err != nil {
		return Event{}, fmt.Errorf("ledger: settle %s: %w", key, err)
	}
	return p.Event(ctx, key)
}

// Record implements Ledger: the row is read under a lock, so two runs
// recording at once both keep what they add.
func (p *Postgres) Record(ctx context.Context, key string, messageIDs, findings []string) (Event, error) {
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return Event{}, fmt.Errorf("ledger: record the findings of %s: %w", key, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	e, err := p.scanEvent(tx.QueryRow(ctx, `SELECT `+pgEventColumns+` FROM events WHERE key = $1 FOR UPDATE`, key), key)
	if err != nil {
		return Event{}, err
	}
	e.MessageIDs, e.Findings = merge(e.MessageIDs, messageIDs), merge(e.Findings, findings)
	if _, err := tx.Exec(ctx, `UPDATE events SET message_ids = $1, findings = $2 WHERE key = $3`, joinList(e.MessageIDs), joinList(e.Findings), key); err != nil {
		return Event{}, fmt.Errorf("ledger: record the findings of %s: %w", key, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return Event{}, fmt.Errorf("ledger: record the findings of %s: %w", key, err)
	}
	return e, nil
}

// RecordSwitch implements Ledger.
func (p *Postgres) RecordSwitch(ctx context.Context, sw Switch) error {
	if _, err := p.pool.Exec(ctx, `INSERT INTO switches (event_key, send_key, from_provider, to_provider, decided_by, evidence, at)
VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (event_key, send_key) DO NOTHING`,
		sw.EventKey, sw.SendKey, sw.From, sw.To, sw.By, sw.Evidence, sw.At); err != nil {
		return fmt.Errorf("ledger: record the switch of %s to %s: %w", sw.EventKey, sw.To, err)
	}
	return nil
}

// Switches implements Ledger.
func (p *Postgres) Switches(ctx context.Context, eventKey string) ([]Switch, error) {
	rows, err := p.pool.Query(ctx, `SELECT send_key, from_provider, to_provider, decided_by, evidence, at FROM switches WHERE event_key = $1 ORDER BY at, send_key`, eventKey)
	if err != nil {
		return nil, fmt.Errorf("ledger: switches of %s: %w", eventKey, err)
	}
	defer rows.Close()
	var out []Switch
	for rows.Next() {
		sw := Switch{EventKey: eventKey}
		if err := rows.Scan(&sw.SendKey, &sw.From, &sw.To, &sw.By, &sw.Evidence, &sw.At); err != nil {
			return nil, fmt.Errorf("ledger: switches of %s: %w", eventKey, err)
		}
		sw.At = sw.At.UTC()
		out = append(out, sw)
	}
	return out, rows.Err()
}

// sealExisting seals the rows written without keys (or before keys were
// given), under the migration lock, so two workers starting together
// seal each row once.
func (p *Postgres) sealExisting(ctx context.Context) error {
	if !p.protect.sealsAtOpen() {
		return nil
	}
	return pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock); err != nil {
			return fmt.Errorf("ledger: lock %s to seal its rows: %w", p.desc, err)
		}
		rows, err := tx.Query(ctx, `SELECT key, recipient, body_text, fingerprint FROM events
			WHERE recipient NOT LIKE $1 AND NOT (outcome != '' AND recipient = '' AND body_text = '') FOR UPDATE`, p.protect.notCurrent())
		if err != nil {
			return fmt.Errorf("ledger: find the rows to seal: %w", err)
		}
		found, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
			var e Event
			return e, r.Scan(&e.Key, &e.Recipient, &e.Text, &e.Fingerprint)
		})
		if err != nil {
			return fmt.Errorf("ledger: find the rows to seal: %w", err)
		}
		plain, err := p.protect.toReseal(found)
		if err != nil {
			return err
		}
		for _, e := range plain {
			w, err := p.protect.seal(e)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE events SET recipient = $1, body_text = $2, fingerprint = $3 WHERE key = $4`, w.Recipient, w.Text, w.Fingerprint, e.Key); err != nil {
				return fmt.Errorf("ledger: seal event %s: %w", e.Key, err)
			}
		}
		rows, err = tx.Query(ctx, `SELECT DISTINCT fingerprint FROM attempts WHERE fingerprint != '' AND fingerprint NOT LIKE 'hmac:%'`)
		if err != nil {
			return fmt.Errorf("ledger: seal the attempts' fingerprints: %w", err)
		}
		fps, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("ledger: seal the attempts' fingerprints: %w", err)
		}
		for _, fp := range fps {
			if _, err := tx.Exec(ctx, `UPDATE attempts SET fingerprint = $1 WHERE fingerprint = $2`, p.protect.fingerprint(fp), fp); err != nil {
				return fmt.Errorf("ledger: seal the attempts' fingerprints: %w", err)
			}
		}
		return nil
	})
}

// Purge implements Ledger.
func (p *Postgres) Purge(ctx context.Context, settledBefore time.Time) (int64, error) {
	var n int64
	var left []error
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT key, provider, recipient, sender, body_text FROM events
			WHERE outcome != '' AND settled_at < $1 AND (recipient != '' OR body_text != '') FOR UPDATE`, settledBefore)
		if err != nil {
			return fmt.Errorf("ledger: purge: %w", err)
		}
		due, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
			var e Event
			return e, r.Scan(&e.Key, &e.Provider, &e.Recipient, &e.Sender, &e.Text)
		})
		if err != nil {
			return fmt.Errorf("ledger: purge: %w", err)
		}
		left = nil // BeginFunc may run this again
		for _, e := range due {
			kept, leave, err := p.protect.keptAfterPurge(e)
			if err != nil {
				return err
			}
			if leave != nil {
				left = append(left, leave)
				continue
			}
			if _, err := tx.Exec(ctx, `UPDATE events SET recipient = '', body_text = '', fingerprint = $1 WHERE key = $2`, kept, e.Key); err != nil {
				return fmt.Errorf("ledger: purge %s: %w", e.Key, err)
			}
			if _, err := tx.Exec(ctx, `UPDATE attempts SET fingerprint = '' WHERE event_key = $1`, e.Key); err != nil {
				return fmt.Errorf("ledger: purge %s: %w", e.Key, err)
			}
		}
		n = int64(len(due) - len(left))
		return nil
	})
	if err != nil {
		return n, err
	}
	return n, leftUnpurged(left)
}
