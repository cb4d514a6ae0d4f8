// Package ledger is the application's own record of events and send
// attempts, kept apart from Temporal and the providers: "keep your
// application's event and send records so you can reconcile an uncertain
// outcome before sending again".
//
// An attempt row is written before the HTTP call and completed after it, so
// a crash in the middle leaves an open row as evidence. The ledger outlives
// Temporal's retention and the providers' replay windows: an event that is
// settled here is never sent again.
package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Event is one business event's record.
type Event struct {
	Key       string `json:"key"`
	Provider  string `json:"provider"`
	Recipient string `json:"recipient"`
	Sender    string `json:"sender,omitempty"`
	Text      string `json:"text"`
	// Fingerprint is the sha256 of the first planned request body.
	Fingerprint string    `json:"fingerprint"`
	WorkflowID  string    `json:"workflowId"`
	RunID       string    `json:"runId"`
	CreatedAt   time.Time `json:"createdAt"`
	// FirstAttemptAt is when the first attempt under the event key began;
	// zero before any attempt.
	FirstAttemptAt time.Time `json:"firstAttemptAt"`
	// Outcome is the final state once settled, "" while open.
	Outcome   string    `json:"outcome,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	MessageID string    `json:"messageId,omitempty"`
	SettledAt time.Time `json:"settledAt"`
	// MessageIDs are every message of the event the runs that settled it
	// knew, and Findings what they reported beside the outcome
	// (FindingDuplicateSend, FindingPossibleDuplicate,
	// FindingOutcomeUnknown): a run that finds the event settled (a
	// second start, a Temporal reset) reports them too (Record).
	MessageIDs []string `json:"messageIds,omitempty"`
	Findings   []string `json:"findings,omitempty"`
}

// Findings a run records beside the event's outcome.
const (
	FindingDuplicateSend     = "duplicateSend"
	FindingPossibleDuplicate = "possibleDuplicate"
	FindingOutcomeUnknown    = "outcomeUnknown"
)

// merge appends to have the items of add it lacks, in order.
func merge(have, add []string) []string {
	for _, a := range add {
		if a != "" && !slices.Contains(have, a) {
			have = append(have, a)
		}
	}
	return have
}

// joinList and splitList store a list of ids or findings in one column.
func joinList(l []string) string { return strings.Join(l, " ") }

func splitList(s string) []string { return merge(nil, strings.Fields(s)) }

// Settled reports whether the event reached a final outcome.
func (e Event) Settled() bool { return e.Outcome != "" }

// Attempt is one HTTP attempt of a send, under the event key or a resend key.
type Attempt struct {
	EventKey string `json:"eventKey"`
	// SendKey is the Idempotency-Key used: the event key or a resend key.
	SendKey string `json:"sendKey"`
	// RunID and Number (the activity attempt, from 1) identify the row, so
	// a retried write of the same attempt changes nothing.
	RunID       string    `json:"runId"`
	Number      int       `json:"attempt"`
	Fingerprint string    `json:"fingerprint"`
	StartedAt   time.Time `json:"startedAt"`
	// EndedAt is zero while the attempt is open (or was cut off by a crash).
	EndedAt    time.Time `json:"endedAt"`
	Outcome    string    `json:"outcome,omitempty"`
	HTTPStatus int       `json:"httpStatus,omitempty"`
	Code       string    `json:"code,omitempty"`
	MessageID  string    `json:"messageId,omitempty"`
	Replay     bool      `json:"replay,omitempty"`
	Reason     string    `json:"reason,omitempty"`
}

// Switch records an event's SMS moving to another provider: from which
// provider to which, under which key, why, and on what evidence.
type Switch struct {
	EventKey string `json:"eventKey"`
	// SendKey is the key at the new provider (keys.Via, or a resend).
	SendKey string `json:"sendKey"`
	From    string `json:"from"`
	To      string `json:"to"`
	// By is "failover" for the run's own switch on proof, or the person
	// who decided it.
	By string `json:"by"`
	// Evidence says what proved that the provider left holds no message
	// of the event, or what the person gave as the reason.
	Evidence string    `json:"evidence"`
	At       time.Time `json:"at"`
}

// Open reports whether the attempt never recorded its end.
func (a Attempt) Open() bool { return a.EndedAt.IsZero() }

// Uncertain reports an attempt that may have taken effect without our
// knowing: no certain answer (unknown, or in progress behind another
// request with the key), or no end recorded at all (cut off by a crash).
// The outcome names are provider.Outcome's.
func (a Attempt) Uncertain() bool {
	switch a.Outcome {
	case "unknown", "in_progress", "":
		return true
	}
	return false
}

// Claim is the answer to claiming an event key.
type Claim struct {
	// Event is the record as stored after the claim.
	Event Event
	// Created is true when this call registered the event.
	Created bool
}

// Errors callers match with errors.Is.
var (
	// ErrNotFound: no event with that key.
	ErrNotFound = errors.New("ledger: no such event")
	// ErrConflict: the key is already claimed by a different message
	// (another recipient, text, sender or provider).
	ErrConflict = errors.New("ledger: the event key is already claimed by a different message")
	// ErrFenced: the run asking is not the run that holds the event (a
	// later run claimed it): an attempt of the old run must not send.
	ErrFenced = errors.New("ledger: the event is held by another run")
)

// ConflictError is the ErrConflict of Claim: it names the differing field.
type ConflictError struct {
	Key string
	// Field is "provider", "recipient", "sender", "text" or "request
	// bytes" (the same fields planned into other bytes, as when the
	// request format changed between the claim and now).
	Field string
	// Stored and Given are the differing values where they may be shown:
	// the fingerprints of the request bytes; empty for personal data.
	Stored, Given string
}

func (e *ConflictError) Error() string {
	if e.Stored != "" || e.Given != "" {
		return fmt.Sprintf("%v: %s was claimed with other %s (stored %s, now %s)", ErrConflict, e.Key, e.Field, e.Stored, e.Given)
	}
	return fmt.Sprintf("%v: %s was claimed for another %s", ErrConflict, e.Key, e.Field)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// fenced is the ErrFenced of an attempt whose run lost the event, or nil
// when the run still holds it (a retried write of the same attempt).
func fenced(a Attempt, holder string) error {
	if holder == a.RunID {
		return nil
	}
	return fmt.Errorf("%w: attempt %d of %s belongs to run %s, but run %s holds the event now; nothing is sent by the old run",
		ErrFenced, a.Number, a.SendKey, a.RunID, holder)
}

// newIdentity makes a ledger identity.
func newIdentity() string { return "ledger-" + uuid.NewString() }

// Rank orders outcomes by what they know of a message that went out: 0
// none (Failed, Cancelled), 1 a message whose delivery is not confirmed
// (Unconfirmed, Accepted), 2 a delivered message. A settle replaces a
// stored outcome of lower rank (Settle) when it names another message, or
// confirms delivery: one that names the stored message without
// confirming it knows nothing the record lacks. A run that learns later that a
// message is alive (after a Temporal reset, another run of the same
// workflow may have settled first) corrects the record, and no settle
// ever takes a known message out of it.
func Rank(outcome string) int {
	switch outcome {
	case "Delivered":
		return 2
	case "Unconfirmed", "Accepted":
		return 1
	}
	return 0
}

// rankSQL is Rank of the stored outcome, in SQL that SQLite and
// PostgreSQL both read.
const rankSQL = `(CASE outcome WHEN 'Delivered' THEN 2 WHEN 'Unconfirmed' THEN 1 WHEN 'Accepted' THEN 1 ELSE 0 END)`

// Outranks reports whether a settle of outcome with messageID replaces
// the stored outcome with storedID: what Settle does in its statement.
func Outranks(outcome, messageID, stored, storedID string) bool {
	if stored == "" {
		return true
	}
	r := settleRank(outcome, messageID)
	return Rank(stored) < r && (messageID != storedID || r == 2)
}

// settleRank is the rank a settle brings: none without a message id.
func settleRank(outcome, messageID string) int {
	if messageID == "" {
		return 0
	}
	return Rank(outcome)
}

// Open opens the ledger at addr: a postgres:// DSN for the ledger a
// fleet of workers shares, or a SQLite file for one host.
//
// On error the Ledger is nil: a nil *Postgres or *SQLite in the
// interface would look open to the caller, whose Close would then panic
// and hide the error.
func Open(ctx context.Context, addr string, opts ...Option) (Ledger, error) {
	if IsPostgresDSN(addr) {
		l, err := OpenPostgres(ctx, addr, opts...)
		if err != nil {
			return nil, err
		}
		return l, nil
	}
	l, err := OpenSQLite(ctx, addr, opts...)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// Ledger stores events and attempts. Implementations are safe for
// concurrent use by many workers.
type Ledger interface {
	// Identity names this ledger: made once with its schema, the same for
	// every worker that opens the same store. A run records the identity
	// of the ledger that claimed its event, and every later activity of
	// the event refuses to work against another.
	Identity() string
	// Describe says where the ledger is, for logs (no secrets).
	Describe() string
	// Now is the ledger's clock: attempt times and the replay window are
	// measured on it, never on one worker's clock against another's.
	Now(ctx context.Context) (time.Time, error)
	// Claim registers the event, or returns the existing record when the
	// same message was claimed before (and moves it to the given run).
	// A different message under the same key is ErrConflict.
	Claim(ctx context.Context, e Event) (Claim, error)
	// Event returns the event's record.
	Event(ctx context.Context, key string) (Event, error)
	// BeginAttempt records an attempt before its HTTP call. Recording the
	// same (SendKey, RunID, Number) again changes nothing. It is refused
	// with ErrFenced when the event is held by another run than a.RunID.
	BeginAttempt(ctx context.Context, a Attempt) error
	// EndAttempt records the attempt's answer.
	EndAttempt(ctx context.Context, a Attempt) error
	// Attempts lists an event's attempts under every key, oldest first.
	Attempts(ctx context.Context, eventKey string) ([]Attempt, error)
	// FirstAttempt returns when the first attempt under sendKey began;
	// ok is false when there was none.
	FirstAttempt(ctx context.Context, sendKey string) (at time.Time, ok bool, err error)
	// Settle records the event's final outcome and returns the record as
	// stored. The first settle wins, unless a later one knows more of a
	// message that went out (Rank): Delivered replaces Unconfirmed or
	// Accepted, and any of those with a message id other than the stored
	// one replaces Failed or Cancelled, keeping the replaced outcome in
	// the reason and the replaced message in MessageIDs. Otherwise
	// settling a settled event changes nothing, and the caller compares
	// the returned outcome with its own.
	Settle(ctx context.Context, key, outcome, reason, messageID string, at time.Time) (Event, error)
	// Record adds message ids and findings to the event's record (a
	// union: nothing recorded is taken out) and returns the record.
	Record(ctx context.Context, key string, messageIDs, findings []string) (Event, error)
	// RecordSwitch records a move of the event to another provider.
	// Recording the same (EventKey, SendKey) again changes nothing.
	RecordSwitch(ctx context.Context, sw Switch) error
	// Switches lists the event's moves, oldest first.
	Switches(ctx context.Context, eventKey string) ([]Switch, error)
	// TakeSlot takes one of the limit request slots that any window of
	// the given length may hold for name (a provider), for every worker
	// that shares this ledger: when fewer than limit were taken in the
	// window that ends now, it records one at the ledger's clock and
	// returns 0; otherwise it records nothing and returns how long until
	// the oldest of them leaves the window.
	TakeSlot(ctx context.Context, name string, limit int, window time.Duration) (wait time.Duration, err error)
	// Purge removes the personal fields (recipient, text, request
	// fingerprints) of the events settled before settledBefore, keeping
	// their keys, message ids, times, outcomes and reasons for the audit,
	// and returns how many events it purged. A claim of a purged event's
	// key finds it settled and sends nothing. An event sealed under a key
	// the ring lacks is left as it is, and named in the error returned
	// beside the count: purged here it would lose the keyed fingerprint
	// by which another message under its key still conflicts.
	Purge(ctx context.Context, settledBefore time.Time) (int64, error)
	// Close releases the store.
	Close() error
}
