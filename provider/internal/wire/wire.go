// Package wire holds the HTTP plumbing the provider clients share: a client
// with explicit timeouts, bounded body reads, Retry-After parsing and the
// classification of answers that never arrived.
package wire

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/acme/smsorch/internal/tracing"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/sms"
)

// JSON serialises a request body without HTML escaping and without the
// encoder's trailing newline, so the bytes are what a person reading the
// request expects. It is called once per planned request.
func JSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// MaxBody bounds how much of an answer is read; provider answers are small.
const MaxBody = 1 << 20

// HTTPClient is the client provider p uses: the one given, as it is
// (paced: its HTTP/1.1 copy, pacedClient), or a new one whose attempts
// end within timeout (def when timeout is 0).
func HTTPClient(p provider.Name, given *http.Client, paced bool, timeout, def time.Duration) (*http.Client, time.Duration, error) {
	if timeout == 0 {
		timeout = def
	}
	switch {
	case given == nil:
		return NewHTTPClient(p, timeout), timeout, nil
	case paced:
		c, err := pacedClient(p, given)
		return c, timeout, err
	}
	return given, timeout, nil
}

// NewHTTPClient returns a client whose every attempt ends within timeout.
// Redirects are not followed: a redirected POST could send the body to a
// place that does not honour the key. Each request is a span of the
// caller's trace and carries its traceparent.
func NewHTTPClient(p provider.Name, timeout time.Duration) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = timeout
	tr.ResponseHeaderTimeout = timeout
	tr.MaxIdleConnsPerHost = 32
	// HTTP/1.1 only: a connection carries one request at a time, so a
	// paced request held back at its connection (gate) can close it
	// without cutting another request off.
	http1(tr)
	return &http.Client{
		Timeout:       timeout,
		Transport:     tracing.Transport(tr, string(p)),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Answer is a provider's HTTP answer, read in full (up to MaxBody).
type Answer struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends one request with the given body bytes and reads the answer. A
// nil body sends none. With a pacer, the request leaves only once it
// gives a slot of the fleet's limit; otherwise the error is a
// *provider.NotSentError. The error is the transport failure, if any.
func Do(ctx context.Context, hc *http.Client, pace provider.Pacer, method, u string, header http.Header, body []byte) (Answer, error) {
	var g *gate
	if pace != nil {
		slot, err := pace.Take(ctx, hc.Timeout)
		if err != nil {
			return Answer{}, err
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		g = &gate{slot: slot, ctx: ctx, cancel: cancel, began: time.Now(), timeout: hc.Timeout}
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: g.gotConn})
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return Answer{}, err
	}
	// net/http quietly sends a request again when a reused connection drops
	// and the request has an Idempotency-Key header and a GetBody. Safe for
	// the provider, but that second request would be an attempt nobody
	// recorded: every HTTP request must be one attempt in the ledger.
	req.GetBody = nil
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := hc.Do(req)
	if held := g.heldBack(err); held != nil {
		if err == nil {
			_ = resp.Body.Close()
		}
		return Answer{}, held
	}
	if err != nil {
		return Answer{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if err != nil {
		// The status line arrived but the body did not: the outcome of a
		// send is as unknown as if nothing had arrived.
		return Answer{Status: resp.StatusCode, Header: resp.Header}, fmt.Errorf("reading the %d answer: %w", resp.StatusCode, err)
	}
	return Answer{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// gate lets a paced request onto a connection only with a slot it can
// use then: the time to dial and shake hands comes after the slot was
// given, and net/http may send a request again on a new connection.
// Held back, the connection is closed before a byte is written (the
// provider clients speak HTTP/1.1 only, so it carries nothing else) and
// the request's context is cancelled, so it is not tried again.
type gate struct {
	slot    provider.Slot
	ctx     context.Context
	cancel  context.CancelFunc
	began   time.Time
	timeout time.Duration // the client's, for the whole request
	mu      sync.Mutex
	held    error
	conns   int
}

func (g *gate) gotConn(info httptrace.GotConnInfo) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.conns++
	if g.held == nil {
		g.held = g.slot.Use(g.ctx)
	}
	if g.held == nil {
		g.held = g.tooLate()
	}
	if g.held != nil {
		g.cancel()
		_ = info.Conn.Close()
	}
}

// tooLate holds back a request whose connection took so long that less
// than half of its time is left for the answer (of the client's timeout,
// or before the caller's deadline): sent, it could end with no answer
// and its outcome unknown; held, it is certainly not sent.
func (g *gate) tooLate() error {
	if g.timeout <= 0 {
		return nil
	}
	left := g.timeout - time.Since(g.began)
	if deadline, ok := g.ctx.Deadline(); ok {
		left = min(left, time.Until(deadline))
	}
	if left >= g.timeout/2 {
		return nil
	}
	return &provider.NotSentError{Reason: fmt.Sprintf("the connection took %s of the request's %s, and %s left is too little for an answer",
		time.Since(g.began).Round(time.Millisecond), g.timeout, max(left, 0).Round(time.Millisecond))}
}

// heldBack is why the gate kept the request from leaving; nil when it
// did not (or there is no gate). A request that failed before it had a
// connection was not sent either: on HTTP/1.1, nothing is written
// before the connection is in hand.
func (g *gate) heldBack(err error) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held == nil && err != nil && g.conns == 0 {
		return &provider.NotSentError{Reason: fmt.Sprintf("no connection to the provider (%s)", describe(err))}
	}
	return g.held
}

// pacedClient is the client a paced provider client uses when given
// one: a copy whose transport speaks HTTP/1.1 only, so that the gate
// can close a connection without cutting off another request. Its
// transport must be an *http.Transport (nil: the default one), which
// reports each connection the gate checks.
func pacedClient(p provider.Name, given *http.Client) (*http.Client, error) {
	var tr *http.Transport
	switch t := given.Transport.(type) {
	case nil:
		tr = http.DefaultTransport.(*http.Transport).Clone()
	case *http.Transport:
		tr = t.Clone()
	default:
		return nil, fmt.Errorf("%s: a paced client needs an *http.Transport, which reports each connection before a request is written on it; the given client has a %T", p, given.Transport)
	}
	http1(tr)
	c := *given
	c.Transport = tr
	return &c, nil
}

// http1 makes tr speak HTTP/1.1 only: one request a connection.
func http1(tr *http.Transport) {
	tr.ForceAttemptHTTP2 = false
	tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	if tr.Protocols != nil {
		var only http.Protocols
		only.SetHTTP1(true)
		tr.Protocols = &only
	}
	if tr.TLSClientConfig != nil && slices.Contains(tr.TLSClientConfig.NextProtos, "h2") {
		// Offered in the handshake, a server would agree on HTTP/2.
		cfg := tr.TLSClientConfig.Clone()
		// A new slice: Clone shares the old one's array with the given config.
		var protos []string
		for _, p := range cfg.NextProtos {
			if p != "h2" {
				protos = append(protos, p)
			}
		}
		cfg.NextProtos = protos
		tr.TLSClientConfig = cfg
	}
}

// Send makes one attempt of req at u as provider p: a request planned
// for another provider is rejected unsent, no answer is an unknown
// outcome (the send may have taken effect), and an answer is read by
// the provider's classify.
func Send(ctx context.Context, hc *http.Client, pace provider.Pacer, p provider.Name, u string, header http.Header, req provider.Request,
	classify func(status int, h http.Header, body []byte, now time.Time) provider.Result) provider.Result {
	if req.Provider != p {
		return provider.Result{Outcome: provider.Rejected, Reason: fmt.Sprintf("%s: the request was planned for %q", p, req.Provider)}
	}
	ans, err := SendPlanned(ctx, hc, pace, u, header, req)
	if err != nil {
		return TransportFailure(p, err)
	}
	return classify(ans.Status, ans.Header, ans.Body, time.Now())
}

// SendPlanned makes one send attempt: req.Body byte for byte, with req.Key
// as the Idempotency-Key, posted to u with the provider's header.
func SendPlanned(ctx context.Context, hc *http.Client, pace provider.Pacer, u string, header http.Header, req provider.Request) (Answer, error) {
	h := header.Clone()
	h.Set("Content-Type", "application/json")
	h.Set("Idempotency-Key", req.Key)
	return Do(ctx, hc, pace, http.MethodPost, u, h, req.Body)
}

// GetJSON reads a provider resource: 200 decodes into v, 404 is
// provider.ErrNotFound, anything else an error naming what was looked up.
func GetJSON(ctx context.Context, hc *http.Client, pace provider.Pacer, p provider.Name, what, u string, header http.Header, v any) error {
	ans, err := Do(ctx, hc, pace, http.MethodGet, u, header, nil)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %s: %w", p, what, err)
	case ans.Status == http.StatusNotFound:
		return fmt.Errorf("%s: %s: %w", p, what, provider.ErrNotFound)
	case ans.Status != http.StatusOK:
		return fmt.Errorf("%s: %s: answer %d: %s", p, what, ans.Status, Snippet(ans.Body))
	}
	if err := json.Unmarshal(ans.Body, v); err != nil {
		return fmt.Errorf("%s: %s: unreadable answer: %s", p, what, Snippet(ans.Body))
	}
	return nil
}

// TransportFailure classifies a send whose answer did not arrive: the
// provider may or may not have acted, so the outcome is Unknown, except
// for a connection the provider refused: no request was sent, so the
// outcome is NotExecuted, and so for a request the fleet's pacer held
// back. The reason names the failure without the URL (it holds
// workspace and channel ids).
func TransportFailure(p provider.Name, err error) provider.Result {
	var held *provider.NotSentError
	if errors.As(err, &held) {
		return provider.Result{Outcome: provider.NotExecuted, Reason: fmt.Sprintf("%s: %s", p, held), RetryAfter: held.RetryAfter}
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return provider.Result{Outcome: provider.NotExecuted, Reason: fmt.Sprintf("%s: the connection was refused; no request was sent", p)}
	}
	return provider.Result{Outcome: provider.Unknown, Reason: fmt.Sprintf("%s: no answer (%s); the send may have taken effect", p, describe(err))}
}

func describe(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed before the answer"
	default:
		return err.Error()
	}
}

// RetryAfter reads a Retry-After header in seconds or as an HTTP date.
// It returns 0 when the header is missing or unreadable.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil {
		if secs < 0 {
			return 0
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// NotProcessed reports the HTTP answers that say the server did not
// process the request at all: 408 Request Timeout (the server gave up
// waiting for the request) and 425 Too Early (it refused to process a
// request that might be replayed). Both invite the same request again.
func NotProcessed(status int) bool {
	return status == http.StatusRequestTimeout || status == http.StatusTooEarly
}

// Snippet returns the start of an answer body for an error message,
// collapsed to one line, with any phone number in it masked: it reaches
// reasons, the ledger, logs and timelines.
func Snippet(b []byte) string {
	s := sms.MaskPhones(strings.Join(strings.Fields(string(b)), " "))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// JoinURL joins a base URL and path segments, escaping each segment.
func JoinURL(base string, segments ...string) string {
	var b strings.Builder
	b.WriteString(strings.TrimRight(base, "/"))
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// CheckBaseURL validates a provider base URL from config.
func CheckBaseURL(p provider.Name, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%s base URL %q is not an http(s) URL: set it to the provider's API address, for example https://api.bird.com or the simulator's http://127.0.0.1:8299", p, raw)
	}
	return nil
}
