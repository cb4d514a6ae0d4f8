// Package sendy is the client for Sendy's messages API, following Sendy's
// idempotency contract (docs/providers.md): 202 for a new send, 200 with the same
// message for a retry with the same Idempotency-Key, and a key bound to the
// recipient and the text (409 IDEMPOTENCY_CONFLICT otherwise).
package sendy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/provider/internal/wire"
	"github.com/acme/smsorch/sms"
)

// Sendy's error codes the client distinguishes.
const (
	CodeIdempotencyConflict = "IDEMPOTENCY_CONFLICT"
	// ModeTransactional marks operational messages; Sendy then skips the
	// marketing opt-out list. Every message the orchestrator sends is the
	// consequence of a business event, so every message carries it.
	ModeTransactional = "transactional"
)

// DefaultTimeout bounds one attempt; keep it below the send activity's
// start-to-close timeout.
const DefaultTimeout = 15 * time.Second

// Config configures the client. BaseURL and Token are required.
type Config struct {
	// BaseURL is Sendy's API address; the client adds /api/v1/messages.
	BaseURL string
	// Token authenticates as "Authorization: Bearer {token}".
	Token logging.Secret
	// Sender is the "from" name used when an event names none.
	Sender string
	// Timeout bounds one HTTP attempt. Default DefaultTimeout.
	Timeout time.Duration
	// HTTPClient overrides the client built from Timeout (tests).
	HTTPClient *http.Client
	// Pacer, when set, holds every request (sends, lookups, searches)
	// to the fleet's limit at the provider.
	Pacer provider.Pacer
}

// Client talks to one Sendy workspace.
type Client struct {
	cfg Config
	hc  *http.Client
}

var _ provider.Client = (*Client)(nil)

// New validates the config and returns a client.
func New(cfg Config) (*Client, error) {
	if err := wire.CheckBaseURL(provider.Sendy, cfg.BaseURL); err != nil {
		return nil, err
	}
	if cfg.Token == "" {
		return nil, errors.New("sendy: the API token is empty: create one in Sendy's settings and pass it to the worker")
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("sendy: timeout %s is negative", cfg.Timeout)
	}
	hc, timeout, err := wire.HTTPClient(provider.Sendy, cfg.HTTPClient, cfg.Pacer != nil, cfg.Timeout, DefaultTimeout)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = timeout
	return &Client{cfg: cfg, hc: hc}, nil
}

// Name implements provider.Client.
func (c *Client) Name() provider.Name { return provider.Sendy }

type sendBody struct {
	To   string `json:"to"`
	From string `json:"from"`
	Body string `json:"body"`
	Mode string `json:"mode,omitempty"`
}

// Plan serialises the send body once. from falls back to the configured
// sender; one of them must be set.
func (c *Client) Plan(key, to, from, text string) (provider.Request, error) {
	if from == "" {
		from = c.cfg.Sender
	}
	if from == "" {
		return provider.Request{}, errors.New("sendy: no sender: give the event a sender, or configure the default Sendy sender")
	}
	body, err := wire.JSON(sendBody{To: to, From: from, Body: text, Mode: ModeTransactional})
	if err != nil {
		return provider.Request{}, err
	}
	return provider.Request{Provider: provider.Sendy, Key: key, To: to, From: from, Text: text, Body: body}, nil
}

func (c *Client) url(segments ...string) string {
	return wire.JoinURL(c.cfg.BaseURL, append([]string{"api", "v1", "messages"}, segments...)...)
}

func (c *Client) header() http.Header {
	return http.Header{
		"Authorization": {"Bearer " + c.cfg.Token.Reveal()},
		"Accept":        {"application/json"},
	}
}

// Send makes one attempt with req.Key as Idempotency-Key and classifies
// the answer.
func (c *Client) Send(ctx context.Context, req provider.Request) provider.Result {
	return wire.Send(ctx, c.hc, c.cfg.Pacer, provider.Sendy, c.url(), c.header(), req, Classify)
}

// message is Sendy's message object.
type message struct {
	ID              string    `json:"id"`
	Status          string    `json:"status"`
	To              string    `json:"to"`
	From            string    `json:"from"`
	Body            string    `json:"body"`
	CreditsCharged  int       `json:"credits_charged"`
	CreditsRefunded int       `json:"credits_refunded"`
	Refunded        bool      `json:"refunded"`
	CreatedAt       time.Time `json:"created_at"`
}

func (m message) toProvider() provider.Message {
	return provider.Message{
		ID: m.ID, To: m.To, Text: m.Body, Status: MapStatus(m.Status), RawStatus: m.Status,
		CreatedAt: m.CreatedAt, Credits: m.CreditsCharged, Refunded: m.Refunded,
	}
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// RateLimitPerMinute is Sendy's documented limit, and Pace the wait it
// implies between two requests: the least a 429 waits.
const (
	RateLimitPerMinute = 60
	Pace               = time.Minute / RateLimitPerMinute
)

// Classify maps one Sendy answer onto an outcome class. 202 is a new send
// and 200 a replay; anything it cannot read with certainty is Unknown.
func Classify(status int, h http.Header, body []byte, now time.Time) provider.Result {
	r := provider.Result{HTTPStatus: status}
	var eb errorBody
	if status >= 300 {
		_ = json.Unmarshal(body, &eb)
		r.Code = eb.Error.Code
	}
	switch {
	case status == http.StatusAccepted || status == http.StatusOK:
		var m message
		if err := json.Unmarshal(body, &m); err != nil || m.ID == "" {
			r.Outcome = provider.Unknown
			r.Reason = fmt.Sprintf("sendy: %d answer without a readable message id (%s); the send may have taken effect", status, wire.Snippet(body))
			return r
		}
		r.MessageID, r.Status, r.Credits, r.CreatedAt = m.ID, MapStatus(m.Status), m.CreditsCharged, m.CreatedAt
		if status == http.StatusAccepted {
			r.Outcome = provider.Accepted
			r.Reason = fmt.Sprintf("sendy: 202 accepted as message %s, %d credit(s) charged", m.ID, m.CreditsCharged)
		} else {
			r.Outcome = provider.Replayed
			r.Reason = fmt.Sprintf("sendy: 200 replay of message %s (status %s); no new message, no new charge", m.ID, m.Status)
		}
	case status == http.StatusConflict && eb.Error.Code == CodeIdempotencyConflict:
		r.Outcome, r.KeyConflict = provider.Rejected, true
		r.Reason = "sendy: 409 IDEMPOTENCY_CONFLICT: the key is bound to another recipient or text; nothing was sent. This is a bug in key assignment: derive the key from the event, not from the recipient"
	case status == http.StatusTooManyRequests:
		r.Outcome = provider.RateLimited
		r.RetryAfter = wire.RetryAfter(h, now)
		if r.RetryAfter < Pace {
			// Without (or below) Retry-After, wait at least the documented
			// pace rather than hammering a limit that is already reached.
			r.RetryAfter = Pace
		}
		r.Reason = fmt.Sprintf("sendy: 429 rate limited (%d requests a minute); retry after %s", RateLimitPerMinute, r.RetryAfter)
	case wire.NotProcessed(status):
		r.Outcome = provider.NotExecuted
		r.RetryAfter = wire.RetryAfter(h, now)
		r.Reason = fmt.Sprintf("sendy: %d %s: the request was not processed; retry the same request", status, http.StatusText(status))
	case status >= 500:
		r.Outcome = provider.Unknown
		r.RetryAfter = wire.RetryAfter(h, now)
		r.Reason = fmt.Sprintf("sendy: %d %s; the send may or may not have taken effect", status, describe(eb, body))
	case status == http.StatusBadRequest:
		r.Outcome = provider.Rejected
		r.Reason = fmt.Sprintf("sendy: 400 bad request: %s", describe(eb, body))
	case status == http.StatusPaymentRequired:
		r.Outcome = provider.Rejected
		r.Reason = fmt.Sprintf("sendy: 402 no credit left: top up the Sendy account (%s)", describe(eb, body))
	case status == http.StatusForbidden:
		r.Outcome = provider.Rejected
		r.Reason = fmt.Sprintf("sendy: 403 not allowed (recipient opted out, or sender not allowed): %s", describe(eb, body))
	case status == http.StatusUnauthorized:
		r.Outcome = provider.Rejected
		r.Reason = "sendy: 401: the API token was refused; check the configured token"
	case status == http.StatusConflict:
		r.Outcome = provider.Unknown
		r.Reason = fmt.Sprintf("sendy: 409 with an unrecognised code %q (%s); retrying the same request is safe", eb.Error.Code, wire.Snippet(body))
	case status >= 400:
		r.Outcome = provider.Rejected
		r.Reason = fmt.Sprintf("sendy: %d: the request was refused: %s", status, describe(eb, body))
	default:
		r.Outcome = provider.Unknown
		r.Reason = fmt.Sprintf("sendy: unexpected %d answer; the send may have taken effect", status)
	}
	return r
}

func describe(eb errorBody, body []byte) string {
	if eb.Error.Code != "" || eb.Error.Message != "" {
		// Sendy's message may name the recipient; the reason reaches the
		// ledger, timelines and logs.
		return sms.MaskPhones(fmt.Sprintf("%s: %s", eb.Error.Code, eb.Error.Message))
	}
	return wire.Snippet(body)
}

// MapStatus maps Sendy's status onto the common statuses.
func MapStatus(s string) provider.Status {
	switch s {
	case "queued":
		return provider.StatusAccepted
	case "sending":
		return provider.StatusSending
	case "sent":
		return provider.StatusSent
	case "delivered":
		return provider.StatusDelivered
	case "undelivered":
		return provider.StatusUndelivered
	case "failed":
		return provider.StatusFailed
	default:
		return provider.StatusUnknown
	}
}

// Get looks a message up by id.
func (c *Client) Get(ctx context.Context, id string) (provider.Message, error) {
	var m message
	if err := wire.GetJSON(ctx, c.hc, c.cfg.Pacer, provider.Sendy, "look up message "+id, c.url(id), c.header(), &m); err != nil {
		return provider.Message{}, err
	}
	if m.ID == "" {
		return provider.Message{}, fmt.Errorf("sendy: look up message %s: the answer has no id", id)
	}
	return m.toProvider(), nil
}
