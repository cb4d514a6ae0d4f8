package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // pure-Go SQLite driver "sqlite"

	"github.com/acme/smsorch/codec"
)

// migrations are applied in order, once each, at Open. Append only: a
// released migration is never edited.
var migrations = []string{
	1: `
CREATE TABLE events (
	key            TEXT PRIMARY KEY,
	provider       TEXT NOT NULL,
	recipient      TEXT NOT NULL,
	sender         TEXT NOT NULL DEFAULT '',
	body_text      TEXT NOT NULL,
	fingerprint    TEXT NOT NULL,
	workflow_id    TEXT NOT NULL,
	run_id         TEXT NOT NULL,
	created_at     TEXT NOT NULL,
	outcome        TEXT NOT NULL DEFAULT '',
	outcome_reason TEXT NOT NULL DEFAULT '',
	message_id     TEXT NOT NULL DEFAULT '',
	settled_at     TEXT NOT NULL DEFAULT ''
);
CREATE TABLE attempts (
	event_key     TEXT NOT NULL REFERENCES events(key),
	send_key      TEXT NOT NULL,
	run_id        TEXT NOT NULL,
	attempt       INTEGER NOT NULL,
	fingerprint   TEXT NOT NULL,
	started_at    TEXT NOT NULL,
	ended_at      TEXT NOT NULL DEFAULT '',
	outcome       TEXT NOT NULL DEFAULT '',
	http_status   INTEGER NOT NULL DEFAULT 0,
	provider_code TEXT NOT NULL DEFAULT '',
	message_id    TEXT NOT NULL DEFAULT '',
	replay        INTEGER NOT NULL DEFAULT 0,
	reason        TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (send_key, run_id, attempt)
);
CREATE INDEX attempts_by_event ON attempts (event_key, started_at);
`,
	2: `
CREATE TABLE ledger_identity (
	id         TEXT PRIMARY KEY,
	created_at TEXT NOT NULL
);
CREATE INDEX attempts_by_send_key ON attempts (send_key, started_at);
`,
	3: `
CREATE TABLE switches (
	event_key  TEXT NOT NULL REFERENCES events(key),
	send_key   TEXT NOT NULL,
	from_provider TEXT NOT NULL,
	to_provider   TEXT NOT NULL,
	decided_by TEXT NOT NULL,
	evidence   TEXT NOT NULL,
	at         TEXT NOT NULL,
	PRIMARY KEY (event_key, send_key)
);
`,
	4: `
ALTER TABLE events ADD COLUMN message_ids TEXT NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN findings TEXT NOT NULL DEFAULT '';
`,
	5: `
CREATE TABLE request_slots (
	name TEXT NOT NULL,
	at   INTEGER NOT NULL
);
CREATE INDEX request_slots_by_name ON request_slots (name, at);
`,
}

// timeLayout is fixed-width UTC, so text order is time order.
const timeLayout = "2006-01-02T15:04:05.000000Z"

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeLayout)
}

func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.Parse(timeLayout, s)
}

// SQLite is the embedded ledger on one SQLite file (pure Go, no cgo). It
// serves the processes of one host: several workers need the Postgres one.
type SQLite struct {
	db      *sql.DB
	path    string
	id      string
	clock   func() time.Time
	protect *protector
}

var _ Ledger = (*SQLite)(nil)

// OpenSQLite opens (creating if needed) the ledger file and applies the
// migrations it lacks.
func OpenSQLite(ctx context.Context, path string, opts ...Option) (*SQLite, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("ledger: create the directory of %s: %w", path, err)
	}
	// The ledger is readable by its owner alone (SQLite gives its WAL and
	// shared-memory files the database file's mode). ":memory:" is no
	// file (the simulation's ledger).
	if path != ":memory:" {
		if err := ownerOnly(path); err != nil {
			return nil, err
		}
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(wal)")
	q.Add("_pragma", "synchronous(full)")
	q.Add("_pragma", "foreign_keys(on)")
	// Deleted and overwritten content is zeroed, so a sealed or purged
	// recipient does not linger in the file's free pages.
	q.Add("_pragma", "secure_delete(on)")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("ledger: open %s: %w", path, err)
	}
	// One connection: SQLite has one writer anyway, and this makes every
	// read see every committed write of this process.
	db.SetMaxOpenConns(1)
	s := &SQLite{db: db, path: path, clock: time.Now, protect: o.protector()}
	if err := s.migrate(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := s.sealExisting(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	if s.id, err = s.identity(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// identity reads the ledger's identity, making it on first use.
func (s *SQLite) identity(ctx context.Context) (string, error) {
	if _, err := s.db.ExecContext(ctx, `INSERT INTO ledger_identity (id, created_at) SELECT ?, ? WHERE NOT EXISTS (SELECT 1 FROM ledger_identity)`,
		newIdentity(), fmtTime(time.Now())); err != nil {
		return "", fmt.Errorf("ledger: make the identity of %s: %w", s.path, err)
	}
	var id string
	if err := s.db.QueryRowContext(ctx, `SELECT id FROM ledger_identity`).Scan(&id); err != nil {
		return "", fmt.Errorf("ledger: read the identity of %s: %w", s.path, err)
	}
	return id, nil
}

// Path is the ledger file.
func (s *SQLite) Path() string { return s.path }

// Identity implements Ledger.
func (s *SQLite) Identity() string { return s.id }

// Describe implements Ledger.
func (s *SQLite) Describe() string { return "sqlite:" + s.path }

// Now implements Ledger: one host, one clock.
func (s *SQLite) Now(context.Context) (time.Time, error) { return s.clock(), nil }

// SetClock replaces the clock (tests that move time). Not safe to call
// while the ledger is in use.
func (s *SQLite) SetClock(now func() time.Time) { s.clock = now }

// Close closes the database.
func (s *SQLite) Close() error { return s.db.Close() }

func (s *SQLite) migrate(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)`); err != nil {
		return fmt.Errorf("ledger: %s is not a usable SQLite database (%w): move it aside or choose another ledger path", s.path, err)
	}
	var have int
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
		return fmt.Errorf("ledger: read the schema version: %w", err)
	}
	if have > len(migrations)-1 {
		return fmt.Errorf("ledger: %s has schema version %d, newer than this program knows (%d): run a newer build", s.path, have, len(migrations)-1)
	}
	for v := have + 1; v < len(migrations); v++ {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("ledger: migration %d: %w", v, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, v, fmtTime(time.Now())); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("ledger: record migration %d: %w", v, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("ledger: migration %d: %w", v, err)
		}
	}
	return nil
}

// Claim implements Ledger.
func (s *SQLite) Claim(ctx context.Context, e Event) (Claim, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Claim{}, err
	}
	defer func() { _ = tx.Rollback() }()
	w, err := s.protect.seal(e)
	if err != nil {
		return Claim{}, fmt.Errorf("ledger: claim %s: %w", e.Key, err)
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO events (key, provider, recipient, sender, body_text, fingerprint, workflow_id, run_id, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING`,
		w.Key, w.Provider, w.Recipient, w.Sender, w.Text, w.Fingerprint, w.WorkflowID, w.RunID, fmtTime(w.CreatedAt))
	if err != nil {
		return Claim{}, fmt.Errorf("ledger: claim %s: %w", e.Key, err)
	}
	n, _ := res.RowsAffected()
	stored, err := s.event(ctx, tx, e.Key)
	if err != nil {
		return Claim{}, err
	}
	if n == 0 {
		if err := compare(stored, e, s.protect); err != nil {
			return Claim{Event: stored}, err
		}
		if !stored.Settled() && stored.RunID != e.RunID {
			if _, err := tx.ExecContext(ctx, `UPDATE events SET workflow_id = ?, run_id = ? WHERE key = ?`, e.WorkflowID, e.RunID, e.Key); err != nil {
				return Claim{}, fmt.Errorf("ledger: move %s to run %s: %w", e.Key, e.RunID, err)
			}
			stored.WorkflowID, stored.RunID = e.WorkflowID, e.RunID
		}
	}
	if err := tx.Commit(); err != nil {
		return Claim{}, fmt.Errorf("ledger: claim %s: %w", e.Key, err)
	}
	return Claim{Event: stored, Created: n == 1}, nil
}

// compare reports how a claim differs from the stored event: a field of
// the message, or else the planned request bytes. Same fields in other
// bytes would make the provider refuse the key (Bird compares raw bytes),
// so that is a conflict too, named as such.
func compare(stored, e Event, p *protector) error {
	field := ""
	switch {
	case stored.Provider != e.Provider:
		field = "provider"
	case stored.Purged():
		// Past the retention only the key, ids, times, outcome and a
		// keyed fingerprint of the message are kept.
		if !p.sameMessage(stored, e) {
			return &ConflictError{Key: e.Key, Field: "message (recipient, sender or text; past the retention only a keyed fingerprint of it is kept)"}
		}
		return nil
	case stored.Recipient != e.Recipient:
		field = "recipient"
	case stored.Sender != e.Sender:
		field = "sender"
	case stored.Text != e.Text:
		field = "text"
	case !p.sameFingerprint(stored.Fingerprint, e.Fingerprint) && !stored.Settled():
		// (A settled event sends nothing more, so its bytes do not matter.)
		// Both as stored: a bare sha256 of a one-time code's request, even
		// cut short, would let the code be guessed from a log line.
		return &ConflictError{Key: e.Key, Field: "request bytes", Stored: short(stored.Fingerprint), Given: short(p.fingerprint(e.Fingerprint))}
	default:
		return nil
	}
	return &ConflictError{Key: e.Key, Field: field}
}

func short(fingerprint string) string {
	if codec.IsMAC(fingerprint) {
		if len(fingerprint) > 30 {
			return fingerprint[:30]
		}
		return fingerprint
	}
	if len(fingerprint) > 12 {
		return "sha256:" + fingerprint[:12]
	}
	return "sha256:" + fingerprint
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *SQLite) event(ctx context.Context, q querier, key string) (Event, error) {
	var e Event
	var created, settled, first, ids, findings string
	err := q.QueryRowContext(ctx, `SELECT key, provider, recipient, sender, body_text, fingerprint, workflow_id, run_id, created_at,
			outcome, outcome_reason, message_id, settled_at,
			COALESCE((SELECT MIN(started_at) FROM attempts WHERE send_key = events.key), ''), message_ids, findings
		FROM events WHERE key = ?`, key).Scan(
		&e.Key, &e.Provider, &e.Recipient, &e.Sender, &e.Text, &e.Fingerprint, &e.WorkflowID, &e.RunID, &created,
		&e.Outcome, &e.Reason, &e.MessageID, &settled, &first, &ids, &findings)
	e.MessageIDs, e.Findings = splitList(ids), splitList(findings)
	if errors.Is(err, sql.ErrNoRows) {
		return Event{}, fmt.Errorf("%w: %s", ErrNotFound, key)
	}
	if err != nil {
		return Event{}, fmt.Errorf("ledger: read event %s: %w", key, err)
	}
	for _, f := range []struct {
		s string
		t *time.Time
	}{{created, &e.CreatedAt}, {settled, &e.SettledAt}, {first, &e.FirstAttemptAt}} {
		if *f.t, err = parseTime(f.s); err != nil {
			return Event{}, fmt.Errorf("ledger: event %s has a malformed time %q: %w", key, f.s, err)
		}
	}
	return s.protect.open(e)
}

// Event implements Ledger.
func (s *SQLite) Event(ctx context.Context, key string) (Event, error) {
	return s.event(ctx, s.db, key)
}

// BeginAttempt implements Ledger. The fence is in the statement: the row
// is written only while the event is held by the attempt's run.
func (s *SQLite) BeginAttempt(ctx context.Context, a Attempt) error {
	res, err := s.db.ExecContext(ctx, `INSERT INTO attempts (event_key, send_key, run_id, attempt, fingerprint, started_at)
		SELECT ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM events WHERE key = ? AND run_id = ?)
		ON CONFLICT (send_key, run_id, attempt) DO NOTHING`,
		a.EventKey, a.SendKey, a.RunID, a.Number, s.protect.fingerprint(a.Fingerprint), fmtTime(a.StartedAt), a.EventKey, a.RunID)
	if err != nil {
		return fmt.Errorf("ledger: record the start of attempt %d of %s: %w", a.Number, a.SendKey, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return s.fenceOrRetried(ctx, a)
	}
	return nil
}

// fenceOrRetried tells a retried write of the same attempt (fine) from an
// attempt of a run that no longer holds the event (refused).
func (s *SQLite) fenceOrRetried(ctx context.Context, a Attempt) error {
	var holder string
	err := s.db.QueryRowContext(ctx, `SELECT run_id FROM events WHERE key = ?`, a.EventKey).Scan(&holder)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %s (claim it before sending)", ErrNotFound, a.EventKey)
	}
	if err != nil {
		return fmt.Errorf("ledger: read the holder of %s: %w", a.EventKey, err)
	}
	return fenced(a, holder)
}

// EndAttempt implements Ledger.
func (s *SQLite) EndAttempt(ctx context.Context, a Attempt) error {
	replay := 0
	if a.Replay {
		replay = 1
	}
	res, err := s.db.ExecContext(ctx, `UPDATE attempts SET ended_at = ?, outcome = ?, http_status = ?, provider_code = ?, message_id = ?, replay = ?, reason = ?
		WHERE send_key = ? AND run_id = ? AND attempt = ?`,
		fmtTime(a.EndedAt), a.Outcome, a.HTTPStatus, a.Code, a.MessageID, replay, a.Reason, a.SendKey, a.RunID, a.Number)
	if err != nil {
		return fmt.Errorf("ledger: record the end of attempt %d of %s: %w", a.Number, a.SendKey, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("ledger: attempt %d of %s in run %s was never begun", a.Number, a.SendKey, a.RunID)
	}
	return nil
}

// Attempts implements Ledger.
func (s *SQLite) Attempts(ctx context.Context, eventKey string) ([]Attempt, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT event_key, send_key, run_id, attempt, fingerprint, started_at, ended_at, outcome, http_status, provider_code, message_id, replay, reason
		FROM attempts WHERE event_key = ? ORDER BY started_at, send_key, attempt`, eventKey)
	if err != nil {
		return nil, fmt.Errorf("ledger: list attempts of %s: %w", eventKey, err)
	}
	defer func() { _ = rows.Close() }()
	var out []Attempt
	for rows.Next() {
		var a Attempt
		var started, ended string
		var replay int
		if err := rows.Scan(&a.EventKey, &a.SendKey, &a.RunID, &a.Number, &a.Fingerprint, &started, &ended, &a.Outcome, &a.HTTPStatus, &a.Code, &a.MessageID, &replay, &a.Reason); err != nil {
			return nil, fmt.Errorf("ledger: read attempts of %s: %w", eventKey, err)
		}
		if a.StartedAt, err = parseTime(started); err != nil {
			return nil, err
		}
		if a.EndedAt, err = parseTime(ended); err != nil {
			return nil, err
		}
		a.Replay = replay == 1
		out = append(out, a)
	}
	return out, rows.Err()
}

// FirstAttempt implements Ledger.
func (s *SQLite) FirstAttempt(ctx context.Context, sendKey string) (time.Time, bool, error) {
	var first string
	if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MIN(started_at), '') FROM attempts WHERE send_key = ?`, sendKey).Scan(&first); err != nil {
		return time.Time{}, false, fmt.Errorf("ledger: first attempt of %s: %w", sendKey, err)
	}
	t, err := parseTime(first)
	return t, first != "", err
}

// Settle implements Ledger. The condition on the empty outcome and the
// rank makes the first settle win (unless a later one ranks higher) in
// the statement itself, not in a read before it.
func (s *SQLite) Settle(ctx context.Context, key, outcome, reason, messageID string, at time.Time) (Event, error) {
	if outcome == "" {
		return Event{}, errors.New("ledger: settle needs an outcome")
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE events SET outcome = ?, message_id = ?, settled_at = ?,
		outcome_reason = CASE WHEN outcome = '' THEN ? ELSE ? || ' (replaces ' || outcome || ': ' || outcome_reason || ')' END,
		message_ids = CASE WHEN message_id = '' THEN message_ids ELSE trim(message_ids || ' ' || message_id) END
		WHERE key = ? AND (outcome = '' OR (`+rankSQL+` < ? AND (message_id <> ? OR ? = 2)))`,
		outcome, messageID, fmtTime(at), reason, reason, key, settleRank(outcome, messageID), messageID, settleRank(outcome, messageID)); err != nil {
		return Event{}, fmt.Errorf("ledger: settle %s: %w", key, err)
	}
	return s.event(ctx, s.db, key)
}

// Record implements Ledger.
func (s *SQLite) Record(ctx context.Context, key string, messageIDs, findings []string) (Event, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return Event{}, fmt.Errorf("ledger: record the findings of %s: %w", key, err)
	}
	defer func() { _ = tx.Rollback() }()
	e, err := s.event(ctx, tx, key)
	if err != nil {
		return Event{}, err
	}
	e.MessageIDs, e.Findings = merge(e.MessageIDs, messageIDs), merge(e.Findings, findings)
	if _, err := tx.ExecContext(ctx, `UPDATE events SET message_ids = ?, findings = ? WHERE key = ?`, joinList(e.MessageIDs), joinList(e.Findings), key); err != nil {
		return Event{}, fmt.Errorf("ledger: record the findings of %s: %w", key, err)
	}
	if err := tx.Commit(); err != nil {
		return Event{}, fmt.Errorf("ledger: record the findings of %s: %w", key, err)
	}
	return e, nil
}

// RecordSwitch implements Ledger.
func (s *SQLite) RecordSwitch(ctx context.Context, sw Switch) error {
	if _, err := s.db.ExecContext(ctx, `INSERT INTO switches (event_key, send_key, from_provider, to_provider, decided_by, evidence, at)
VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (event_key, send_key) DO NOTHING`,
		sw.EventKey, sw.SendKey, sw.From, sw.To, sw.By, sw.Evidence, fmtTime(sw.At)); err != nil {
		return fmt.Errorf("ledger: record the switch of %s to %s: %w", sw.EventKey, sw.To, err)
	}
	return nil
}

// Switches implements Ledger.
func (s *SQLite) Switches(ctx context.Context, eventKey string) ([]Switch, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT send_key, from_provider, to_provider, decided_by, evidence, at FROM switches WHERE event_key = ? ORDER BY at, send_key`, eventKey)
	if err != nil {
		return nil, fmt.Errorf("ledger: switches of %s: %w", eventKey, err)
	}
	defer func() { _ = rows.Close() }()
	var out []Switch
	for rows.Next() {
		sw := Switch{EventKey: eventKey}
		var at string
		if err := rows.Scan(&sw.SendKey, &sw.From, &sw.To, &sw.By, &sw.Evidence, &at); err != nil {
			return nil, fmt.Errorf("ledger: switches of %s: %w", eventKey, err)
		}
		if sw.At, err = parseTime(at); err != nil {
			return nil, fmt.Errorf("ledger: switches of %s: %w", eventKey, err)
		}
		out = append(out, sw)
	}
	return out, rows.Err()
}

// sealExisting seals the rows written without keys (or before keys were
// given): recipients and texts, and the request fingerprints. The file
// is then vacuumed, so the plain values do not stay in its free pages.
func (s *SQLite) sealExisting(ctx context.Context) error {
	if !s.protect.sealsAtOpen() {
		return nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT key, recipient, body_text, fingerprint FROM events
		WHERE recipient NOT LIKE ? AND NOT (outcome != '' AND recipient = '' AND body_text = '')`, s.protect.notCurrent())
	if err != nil {
		return fmt.Errorf("ledger: find the rows to seal: %w", err)
	}
	var found []Event
	for rows.Next() {
		var e Event
		if err := rows.Scan(&e.Key, &e.Recipient, &e.Text, &e.Fingerprint); err != nil {
			_ = rows.Close()
			return fmt.Errorf("ledger: find the rows to seal: %w", err)
		}
		found = append(found, e)
	}
	_ = rows.Close()
	plain, err := s.protect.toReseal(found)
	if err != nil {
		return err
	}
	var attempts int64
	if len(plain) == 0 {
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM attempts WHERE fingerprint != '' AND fingerprint NOT LIKE 'hmac:%'`).Scan(&attempts); err != nil {
			return fmt.Errorf("ledger: find the rows to seal: %w", err)
		}
		if attempts == 0 {
			return nil
		}
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for _, e := range plain {
		w, err := s.protect.seal(e)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE events SET recipient = ?, body_text = ?, fingerprint = ? WHERE key = ?`, w.Recipient, w.Text, w.Fingerprint, e.Key); err != nil {
			return fmt.Errorf("ledger: seal event %s: %w", e.Key, err)
		}
	}
	fps, err := tx.QueryContext(ctx, `SELECT DISTINCT fingerprint FROM attempts WHERE fingerprint != '' AND fingerprint NOT LIKE 'hmac:%'`)
	if err != nil {
		return fmt.Errorf("ledger: seal the attempts' fingerprints: %w", err)
	}
	var list []string
	for fps.Next() {
		var fp string
		if err := fps.Scan(&fp); err != nil {
			_ = fps.Close()
			return err
		}
		list = append(list, fp)
	}
	_ = fps.Close()
	for _, fp := range list {
		if _, err := tx.ExecContext(ctx, `UPDATE attempts SET fingerprint = ? WHERE fingerprint = ?`, s.protect.fingerprint(fp), fp); err != nil {
			return fmt.Errorf("ledger: seal the attempts' fingerprints: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("ledger: seal the rows written in plain: %w", err)
	}
	for _, q := range []string{`VACUUM`, `PRAGMA wal_checkpoint(TRUNCATE)`} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("ledger: %s after sealing: %w", q, err)
		}
	}
	return nil
}

// Purge implements Ledger.
func (s *SQLite) Purge(ctx context.Context, settledBefore time.Time) (int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.QueryContext(ctx, `SELECT key, provider, recipient, sender, body_text FROM events
		WHERE outcome != '' AND settled_at != '' AND settled_at < ? AND (recipient != '' OR body_text != '')`, fmtTime(settledBefore))
	if err != nil {
		return 0, fmt.Errorf("ledger: purge: %w", err)
	}
	var due []Event
	for rows.Next() {
		var e Event
		if err := rows.Scan(&e.Key, &e.Provider, &e.Recipient, &e.Sender, &e.Text); err != nil {
			_ = rows.Close()
			return 0, fmt.Errorf("ledger: purge: %w", err)
		}
		due = append(due, e)
	}
	_ = rows.Close()
	var left []error
	for _, e := range due {
		kept, leave, err := s.protect.keptAfterPurge(e)
		if err != nil {
			return 0, err
		}
		if leave != nil {
			left = append(left, leave)
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE events SET recipient = '', body_text = '', fingerprint = ? WHERE key = ?`, kept, e.Key); err != nil {
			return 0, fmt.Errorf("ledger: purge %s: %w", e.Key, err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE attempts SET fingerprint = '' WHERE event_key = ?`, e.Key); err != nil {
			return 0, fmt.Errorf("ledger: purge %s: %w", e.Key, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("ledger: purge: %w", err)
	}
	n := int64(len(due) - len(left))
	if n > 0 {
		if _, err := s.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			return n, fmt.Errorf("ledger: checkpoint after the purge: %w", err)
		}
	}
	return n, leftUnpurged(left)
}

// ownerOnly creates the file at path readable and writable by its owner
// alone, or narrows an existing one to that.
func ownerOnly(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("ledger: create %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("ledger: create %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return fmt.Errorf("ledger: make %s readable by its owner only: %w", path, err)
	}
	return nil
}
