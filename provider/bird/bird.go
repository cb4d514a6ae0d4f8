// Package bird is the client for Bird's SMS channel API, following Bird's
// idempotency contract (docs/providers.md): one Idempotency-Key per intended SMS,
// the identical request bytes on every retry, Idempotency-Replay: true on a
// replayed answer, and the E-codes of its 409 and 503 answers.
package bird

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/provider/internal/wire"
	"github.com/acme/smsorch/sms"
)

// Bird's error codes that change what the client does.
const (
	CodeKeyReuse    = "E01005" // the key was used for a different request
	CodeInProgress  = "E01004" // a concurrent request with the key has not finished
	CodeUnavailable = "E01033" // idempotency protection unavailable; not executed

	// ReplayHeader marks an answer Bird replayed from its store.
	ReplayHeader = "Idempotency-Replay"
)

// DefaultTimeout bounds one attempt. It must stay below the send
// activity's start-to-close timeout, or Temporal starts the next attempt
// while this one is still on the wire.
const DefaultTimeout = 15 * time.Second

// Config configures the client. BaseURL, AccessKey, WorkspaceID and
// ChannelID are required.
type Config struct {
	// BaseURL is Bird's API address, e.g. https://api.bird.com.
	BaseURL string
	// AccessKey authenticates as "Authorization: AccessKey {key}".
	AccessKey logging.Secret
	// WorkspaceID and ChannelID select the SMS channel; idempotency keys
	// are scoped to the workspace.
	WorkspaceID, ChannelID string
	// Timeout bounds one HTTP attempt. Default DefaultTimeout.
	Timeout time.Duration
	// HTTPClient overrides the client built from Timeout (tests).
	HTTPClient *http.Client
	// Pacer, when set, holds every request (sends, lookups, searches)
	// to the fleet's limit at the provider.
	Pacer provider.Pacer
}

// Client talks to one Bird channel.
type Client struct {
	cfg Config
	hc  *http.Client
}

var (
	_ provider.Client = (*Client)(nil)
	_ provider.Lister = (*Client)(nil)
)

// New validates the config and returns a client.
func New(cfg Config) (*Client, error) {
	if err := wire.CheckBaseURL(provider.Bird, cfg.BaseURL); err != nil {
		return nil, err
	}
	switch {
	case cfg.AccessKey == "":
		return nil, errors.New("bird: the access key is empty: set it from your Bird workspace's API access keys")
	case cfg.WorkspaceID == "" || cfg.ChannelID == "":
		return nil, errors.New("bird: the workspace id and the channel id are both required: copy them from the SMS channel's page in Bird")
	case cfg.Timeout < 0:
		return nil, fmt.Errorf("bird: timeout %s is negative", cfg.Timeout)
	}
	hc, timeout, err := wire.HTTPClient(provider.Bird, cfg.HTTPClient, cfg.Pacer != nil, cfg.Timeout, DefaultTimeout)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = timeout
	return &Client{cfg: cfg, hc: hc}, nil
}

// Name implements provider.Client.
func (c *Client) Name() provider.Name { return provider.Bird }

type contact struct {
	IdentifierKey   string `json:"identifierKey"`
	IdentifierValue string `json:"identifierValue"`
}

type sendBody struct {
	Receiver struct {
		Contacts []contact `json:"contacts"`
	} `json:"receiver"`
	Body struct {
		Type string `json:"type"`
		Text struct {
			Text string `json:"text"`
		} `json:"text"`
	} `json:"body"`
	Reference string `json:"reference,omitempty"`
}

// Plan serialises the send body once; the key goes into "reference" as
// well, so Bird's message list can be searched by key during
// reconciliation. Bird sends from the channel's sender, so from must be empty.
func (c *Client) Plan(key, to, from, text string) (provider.Request, error) {
	if from != "" {
		return provider.Request{}, fmt.Errorf("bird: a sender %q was given, but Bird sends from the channel's own sender: leave the sender empty, or configure another channel", from)
	}
	var b sendBody
	b.Receiver.Contacts = []contact{{IdentifierKey: "phonenumber", IdentifierValue: to}}
	b.Body.Type = "text"
	b.Body.Text.Text = text
	b.Reference = key
	body, err := wire.JSON(b)
	if err != nil {
		return provider.Request{}, err
	}
	return provider.Request{Provider: provider.Bird, Key: key, To: to, Text: text, Body: body}, nil
}

func (c *Client) messagesURL(segments ...string) string {
	return wire.JoinURL(c.cfg.BaseURL, append([]string{"workspaces", c.cfg.WorkspaceID, "channels", c.cfg.ChannelID, "messages"}, segments...)...)
}

func (c *Client) header() http.Header {
	return http.Header{
		"Authorization": {"AccessKey " + c.cfg.AccessKey.Reveal()},
		"Accept":        {"application/json"},
	}
}

// Send makes one attempt with req.Key as Idempotency-Key and req.Body as
// the exact body, and classifies the answer.
func (c *Client) Send(ctx context.Context, req provider.Request) provider.Result {
	return wire.Send(ctx, c.hc, c.cfg.Pacer, provider.Bird, c.messagesURL(), c.header(), req, Classify)
}

// message is Bird's message resource, as far as the orchestrator reads it.
type message struct {
	ID        string    `json:"id"`
	Status    string    `json:"status"`
	Reference string    `json:"reference"`
	CreatedAt time.Time `json:"createdAt"`
	Receiver  struct {
		Contacts []contact `json:"contacts"`
	} `json:"receiver"`
	Body struct {
		Text struct {
			Text string `json:"text"`
		} `json:"text"`
	} `json:"body"`
}

func (m message) toProvider() provider.Message {
	out := provider.Message{
		ID: m.ID, Reference: m.Reference, Text: m.Body.Text.Text,
		Status: MapStatus(m.Status), RawStatus: m.Status, CreatedAt: m.CreatedAt,
	}
	if len(m.Receiver.Contacts) > 0 {
		out.To = m.Receiver.Contacts[0].IdentifierValue
	}
	return out
}

// errorBody is Bird's error answer; extra fields are ignored.
type errorBody struct {
	Code    string `json:"code"`
	Name    string `json:"name"`
	Message string `json:"message"`
}

// Classify maps one Bird answer onto an outcome class, following the table
// in docs/providers.md. Anything it cannot read with certainty is Unknown, never
// Accepted: a retry with the same key and bytes is always safe.
func Classify(status int, h http.Header, body []byte, now time.Time) provider.Result {
	r := provider.Result{HTTPStatus: status}
	replay := h.Get(ReplayHeader) == "true"
	var eb errorBody
	if status >= 300 {
		_ = json.Unmarshal(body, &eb) // a body we cannot read leaves the code empty
		r.Code = eb.Code
	}
	switch {
	case status >= 200 && status < 300:
		var m message
		if err := json.Unmarshal(body, &m); err != nil || m.ID == "" {
			r.Outcome = provider.Unknown
			r.Reason = fmt.Sprintf("bird: %d answer without a readable message id (%s); the send may have taken effect", status, wire.Snippet(body))
			return r
		}
		r.Outcome, r.MessageID, r.Status = provider.Accepted, m.ID, MapStatus(m.Status)
		r.Reason = fmt.Sprintf("bird: accepted as message %s", m.ID)
		if replay {
			r.Outcome = provider.Replayed
			r.Reason = fmt.Sprintf("bird: replayed the stored answer for message %s (Idempotency-Replay: true); nothing sent again", m.ID)
		}
	case status == http.StatusConflict && eb.Code == CodeKeyReuse:
		r.Outcome, r.KeyConflict = provider.Rejected, true
		r.Reason = "bird: 409 E01005 IdempotencyKeyReuse: the key was already used for a different request; this is a bug in key assignment (the key must come from the event, and the body must be byte-identical on every attempt)"
	case status == http.StatusConflict && eb.Code == CodeInProgress:
		r.Outcome = provider.InProgress
		r.Reason = "bird: 409 E01004 RequestInProgress: a request with this key is still running; retry the same request shortly"
	case status == http.StatusConflict:
		r.Outcome = provider.Unknown
		r.Reason = fmt.Sprintf("bird: 409 with an unrecognised code %q (%s); retrying the same request is safe", eb.Code, wire.Snippet(body))
	case status == http.StatusServiceUnavailable && eb.Code == CodeUnavailable:
		r.Outcome = provider.NotExecuted
		r.RetryAfter = wire.RetryAfter(h, now)
		r.Reason = "bird: 503 E01033 IdempotencyUnavailable: this attempt was not executed; retry with backoff"
	case wire.NotProcessed(status):
		r.Outcome = provider.NotExecuted
		r.RetryAfter = wire.RetryAfter(h, now)
		r.Reason = fmt.Sprintf("bird: %d %s: the request was not processed; retry the same request", status, http.StatusText(status))
	case status == http.StatusTooManyRequests:
		r.Outcome = provider.RateLimited
		r.RetryAfter = wire.RetryAfter(h, now)
		r.Reason = fmt.Sprintf("bird: 429 rate limited, not processed; retry after %s", r.RetryAfter)
	case status >= 500:
		r.Outcome = provider.Unknown
		r.RetryAfter = wire.RetryAfter(h, now)
		r.Reason = fmt.Sprintf("bird: %d %s; Bird stores no 5xx answers, so the send may or may not have taken effect", status, describe(eb, body))
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		r.Outcome = provider.Rejected
		r.Reason = fmt.Sprintf("bird: %d: the access key was refused for this workspace; check the configured access key and workspace id", status)
	case status == http.StatusNotFound:
		r.Outcome = provider.Rejected
		r.Reason = fmt.Sprintf("bird: 404: no such workspace or channel; check the configured workspace and channel ids (%s)", describe(eb, body))
	case status >= 400:
		r.Outcome = provider.Rejected
		r.Reason = fmt.Sprintf("bird: %d: the request was refused: %s", status, describe(eb, body))
	default:
		r.Outcome = provider.Unknown
		r.Reason = fmt.Sprintf("bird: unexpected %d answer; the send may have taken effect", status)
	}
	return r
}

func describe(eb errorBody, body []byte) string {
	if eb.Code != "" || eb.Message != "" {
		// Bird's message may name the recipient; the reason reaches the
		// ledger, timelines and logs.
		return sms.MaskPhones(fmt.Sprintf("%s %s: %s", eb.Code, eb.Name, eb.Message))
	}
	return wire.Snippet(body)
}

// MapStatus maps Bird's message status onto the common statuses.
func MapStatus(s string) provider.Status {
	switch s {
	case "accepted", "processing", "scheduled":
		return provider.StatusAccepted
	case "sending":
		return provider.StatusSending
	case "sent":
		return provider.StatusSent
	case "delivered":
		return provider.StatusDelivered
	case "failed", "delivery_failed", "rejected":
		return provider.StatusFailed
	case "undelivered", "expired":
		return provider.StatusUndelivered
	default:
		return provider.StatusUnknown
	}
}

// Get looks a message up by id.
func (c *Client) Get(ctx context.Context, id string) (provider.Message, error) {
	var m message
	if err := wire.GetJSON(ctx, c.hc, c.cfg.Pacer, provider.Bird, "look up message "+id, c.messagesURL(id), c.header(), &m); err != nil {
		return provider.Message{}, err
	}
	if m.ID == "" {
		return provider.Message{}, fmt.Errorf("bird: look up message %s: the answer has no id", id)
	}
	return m.toProvider(), nil
}

// ListPageSize is the page size List asks for.
const ListPageSize = 100

// maxPages bounds List, so a provider that keeps returning page tokens
// cannot hold a reconciliation forever.
const maxPages = 1000

// maxListTime bounds a List whose context has no deadline of its own.
// Reconciliation runs List in an activity whose start-to-close timeout
// (2 minutes) is its deadline; this keeps any other caller as bounded.
const maxListTime = 2 * time.Minute

// ErrListCutOff is matched (errors.Is) by the error of a List that
// stopped before the last page: at maxPages, or at the context's
// deadline. The messages read so far are not returned: a message of the
// event may be on a page that was never read, so the search has failed
// and must not be taken for one that found nothing.
var ErrListCutOff = errors.New("search cut off")

type listPage struct {
	Results       []message `json:"results"`
	NextPageToken string    `json:"nextPageToken"`
}

// List returns the outgoing messages created in [from, to], following
// page tokens to the end. It reads at most maxPages pages and stops at
// the context's deadline (maxListTime when the context has none); either
// way the search is incomplete and List fails with ErrListCutOff.
func (c *Client) List(ctx context.Context, from, to time.Time) ([]provider.Message, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, maxListTime)
		defer cancel()
	}
	began := time.Now()
	cutOff := func(pages, n int, why string, cause error) error {
		unit := "pages"
		if pages == 1 {
			unit = "page"
		}
		err := fmt.Errorf("bird: list messages from %s to %s: %w after %d %s (%d messages), %s: the list is incomplete "+
			"(a message of the event may be on a page not read), so treat the search as failed, not as one that found nothing",
			from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339), ErrListCutOff, pages, unit, n, why)
		if cause != nil {
			err = fmt.Errorf("%w (%w)", err, cause)
		}
		return err
	}
	stopped := func(pages, n int) error {
		when := "at the context's deadline"
		if errors.Is(ctx.Err(), context.Canceled) {
			when = "when its context was cancelled"
		}
		return cutOff(pages, n, fmt.Sprintf("%s, %s after the search began", when, time.Since(began).Round(time.Millisecond)), ctx.Err())
	}
	var out []provider.Message
	token := ""
	for page := 0; page < maxPages; page++ {
		if ctx.Err() != nil {
			return nil, stopped(page, len(out))
		}
		q := url.Values{
			"direction": {"outgoing"},
			"startAt":   {from.UTC().Format(time.RFC3339Nano)},
			"endAt":     {to.UTC().Format(time.RFC3339Nano)},
			"limit":     {strconv.Itoa(ListPageSize)},
		}
		if token != "" {
			q.Set("pageToken", token)
		}
		var p listPage
		if err := wire.GetJSON(ctx, c.hc, c.cfg.Pacer, provider.Bird, "list messages", c.messagesURL()+"?"+q.Encode(), c.header(), &p); err != nil {
			if ctx.Err() != nil {
				// The error names the page's URL, which holds the
				// workspace and channel ids: the context says it all.
				return nil, stopped(page, len(out))
			}
			return nil, err
		}
		for _, m := range p.Results {
			out = append(out, m.toProvider())
		}
		if p.NextPageToken == "" {
			return out, nil
		}
		if p.NextPageToken == token {
			return nil, fmt.Errorf("bird: list messages: the page token %q repeats", token)
		}
		token = p.NextPageToken
	}
	return nil, cutOff(maxPages, len(out), "the most one search reads, with Bird still offering a next page", nil)
}
