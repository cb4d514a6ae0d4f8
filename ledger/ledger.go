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
	"time"
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
}

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

// Open reports whether the attempt never recorded its end.
func (a Attempt) Open() bool { return a.EndedAt.IsZero() }

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

// Ledger stores events and attempts. Implementations are safe for
// concurrent use by many workers.
type Ledger interface {
	// Claim registers the event, or returns the existing record when the
	// same message was claimed before (and moves it to the given run).
	// A different message under the same key is ErrConflict.
	Claim(ctx context.Context, e Event) (Claim, error)
	// Event returns the event's record.
	Event(ctx context.Context, key string) (Event, error)
	// BeginAttempt records an attempt before its HTTP call. Recording the
	// same (SendKey, RunID, Number) again changes nothing.
	BeginAttempt(ctx context.Context, a Attempt) error
	// EndAttempt records the attempt's answer.
	EndAttempt(ctx context.Context, a Attempt) error
	// Attempts lists an event's attempts under every key, oldest first.
	Attempts(ctx context.Context, eventKey string) ([]Attempt, error)
	// FirstAttempt returns when the first attempt under sendKey began;
	// ok is false when there was none.
	FirstAttempt(ctx context.Context, sendKey string) (at time.Time, ok bool, err error)
	// Settle records the event's final outcome and returns the record as
	// stored. The first settle wins: settling a settled event changes
	// nothing, and the caller compares the returned outcome with its own.
	Settle(ctx context.Context, key, outcome, reason, messageID string, at time.Time) (Event, error)
	// Close releases the store.
	Close() error
}
