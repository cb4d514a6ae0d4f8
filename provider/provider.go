// Package provider holds what the orchestrator knows about SMS providers
// independently of which one it talks to: the planned request, the outcome
// classes that the retry policy is written against, and the common delivery
// statuses. The Bird and Sendy clients live in the subpackages and map their
// own contracts onto these types.
package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Name identifies a provider.
type Name string

// The supported providers.
const (
	Bird  Name = "bird"
	Sendy Name = "sendy"
)

// Names lists the supported providers, for help texts and errors.
var Names = []Name{Bird, Sendy}

// ParseName accepts a provider name in any case.
func ParseName(s string) (Name, error) {
	n := Name(strings.ToLower(strings.TrimSpace(s)))
	for _, known := range Names {
		if n == known {
			return n, nil
		}
	}
	return "", fmt.Errorf("provider %q is not known: use %q or %q", s, Bird, Sendy)
}

// Request is one planned SMS. It is made once, when the send is planned, and
// the same value, Body bytes included, goes out on every attempt: Bird
// compares the raw bytes of a retry with the original.
type Request struct {
	Provider Name `json:"provider"`
	// Key is the Idempotency-Key: the SMS key of the event or of a resend.
	Key string `json:"key"`
	// To is the recipient in E.164 form.
	To string `json:"to"`
	// From is the sender name (Sendy); empty for Bird, whose channel decides it.
	From string `json:"from,omitempty"`
	// Text is the message.
	Text string `json:"text"`
	// Body is the serialised request body, sent byte for byte on every attempt.
	Body []byte `json:"body"`
}

// Fingerprint identifies the request bytes (sha256, hex) without carrying
// the recipient or the text; it is what the ledger compares.
func (r Request) Fingerprint() string {
	sum := sha256.Sum256(r.Body)
	return hex.EncodeToString(sum[:])
}

// Outcome is the class of one attempt's answer. The retry policy is written
// against these classes and nothing else.
type Outcome string

// The outcome classes.
const (
	// Accepted: a new send; the provider created a message.
	Accepted Outcome = "accepted"
	// Replayed: the provider already had this request and returned its
	// stored answer without sending again.
	Replayed Outcome = "replayed"
	// InProgress: a concurrent request with the same key has not finished
	// (Bird 409 E01004). Retry the same request after a short delay.
	InProgress Outcome = "in_progress"
	// NotExecuted: the provider says this attempt did not run (Bird 503
	// E01033). Retry with backoff; it says nothing about earlier attempts.
	NotExecuted Outcome = "not_executed"
	// Unknown: no usable answer (timeout, dropped connection, 5xx, an
	// answer we cannot read). The send may have taken effect. Retry the
	// same request: a stored success is replayed.
	Unknown Outcome = "unknown"
	// RateLimited: not processed; retry after Result.RetryAfter.
	RateLimited Outcome = "rate_limited"
	// Rejected: the request itself is wrong, or the key belongs to another
	// request. Never retried.
	Rejected Outcome = "rejected"
)

// Sent reports whether the provider holds a message for the request.
func (o Outcome) Sent() bool { return o == Accepted || o == Replayed }

// Result is what one attempt learned.
type Result struct {
	Outcome Outcome `json:"outcome"`
	// HTTPStatus is 0 when no answer arrived.
	HTTPStatus int `json:"httpStatus,omitempty"`
	// Code is the provider's error code: "E01005", "IDEMPOTENCY_CONFLICT".
	Code string `json:"code,omitempty"`
	// Reason says what happened, for people; never holds secrets or numbers.
	Reason string `json:"reason,omitempty"`
	// KeyConflict marks a rejection because the key was used for a
	// different request: a bug in key assignment, to be fixed, not retried.
	KeyConflict bool `json:"keyConflict,omitempty"`
	// MessageID and Status are set when Outcome.Sent().
	MessageID string `json:"messageId,omitempty"`
	Status    Status `json:"status,omitempty"`
	// RetryAfter is the provider's Retry-After (on 429, 503 and other
	// 5xx), or for RateLimited the least wait the provider's documented
	// pace implies; 0 leaves the retry policy's backoff.
	RetryAfter time.Duration `json:"retryAfter,omitempty"`
	// Credits is what Sendy charged for the message (0 for Bird).
	Credits int `json:"credits,omitempty"`
	// CreatedAt is when the provider made the message, on its clock,
	// where its answer says (Sendy's created_at): a replay of a message
	// made after an earlier attempt could no longer take effect says
	// that attempt did not make it.
	CreatedAt time.Time `json:"createdAt,omitzero"`
}

// Status is a delivery status common to both providers.
type Status string

// The common statuses. Each provider's own statuses map onto these.
const (
	StatusAccepted    Status = "accepted" // taken by the provider, not yet by the network
	StatusSending     Status = "sending"
	StatusSent        Status = "sent" // the network took it
	StatusDelivered   Status = "delivered"
	StatusUndelivered Status = "undelivered"
	StatusFailed      Status = "failed"
	StatusUnknown     Status = "unknown" // a status we do not recognise
)

// Final reports whether the status will not change any more.
func (s Status) Final() bool {
	return s == StatusDelivered || s == StatusUndelivered || s == StatusFailed
}

// Failed reports whether the message did not reach the phone.
func (s Status) Failed() bool { return s == StatusUndelivered || s == StatusFailed }

// Message is the provider's record of one message, as a lookup returns it.
type Message struct {
	ID string `json:"id"`
	// Reference is the key the message was sent under, where the provider
	// keeps it (Bird's "reference"); empty otherwise.
	Reference string    `json:"reference,omitempty"`
	To        string    `json:"to"`
	Text      string    `json:"text"`
	Status    Status    `json:"status"`
	RawStatus string    `json:"rawStatus"`
	CreatedAt time.Time `json:"createdAt"`
	Credits   int       `json:"credits,omitempty"`
	Refunded  bool      `json:"refunded,omitempty"`
}

// ErrNotFound is returned by lookups for a message the provider does not have.
var ErrNotFound = errors.New("message not found at the provider")

// ErrNotSent is what an error wraps when no request left: a send that
// ends with it was not executed, and the same request may go again.
var ErrNotSent = errors.New("no request was sent")

// NotSentError says why no request left, and when one may.
type NotSentError struct {
	Reason string
	// RetryAfter is when a slot may be free (0: unknown).
	RetryAfter time.Duration
}

func (e *NotSentError) Error() string { return e.Reason + "; no request was sent" }

// Is makes errors.Is(err, ErrNotSent) true.
func (e *NotSentError) Is(target error) bool { return target == ErrNotSent }

// Pacer holds one provider's requests to its limit for the whole fleet:
// a client asks it before every HTTP request it makes.
type Pacer interface {
	// Take returns a slot once one request may leave, or a
	// *NotSentError when none may before ctx's deadline leaves the
	// request reserve (its own timeout) to get its answer.
	Take(ctx context.Context, reserve time.Duration) (Slot, error)
}

// Slot is one request's place within a provider's limit.
type Slot interface {
	// Use is called with each connection the request is about to be
	// written on, before a byte of it is: nil lets it leave; a
	// *NotSentError says it must not (the slot is too old by then, or
	// the HTTP client is sending the request again, on another
	// connection, and no slot is free for that).
	Use(ctx context.Context) error
}

// Client is one provider's API, as the activities use it.
type Client interface {
	Name() Name
	// Plan serialises the request body once. The result is sent unchanged
	// on every attempt.
	Plan(key, to, from, text string) (Request, error)
	// Send makes one attempt and classifies the answer; it never returns
	// an unclassified failure (a failure to reach the provider is Unknown).
	Send(ctx context.Context, req Request) Result
	// Get looks a message up by id; ErrNotFound when the provider has none.
	Get(ctx context.Context, id string) (Message, error)
}

// Lister is implemented by providers that can list their sent messages in
// a time window (Bird). Sendy has no such endpoint.
type Lister interface {
	List(ctx context.Context, from, to time.Time) ([]Message, error)
}
