// Package intake is the HTTP door for systems that are not Go: a shop's
// "order shipped" webhook, a cron. It speaks JSON and maps the starter's
// answers onto HTTP:
//
//	POST /v1/events      an Event  → 202 started, 200 existing run, 409 conflict, 400 invalid, 415 not JSON (unsigned)
//	GET  /v1/events/{key}          → the run's state and timeline
//	GET  /healthz                  → 200
//
// With a shared secret configured, every request must carry
//
//	X-Smsorch-Timestamp: <unix seconds>
//	X-Smsorch-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<raw body>">
//
// (for a GET, of "<timestamp>.GET <path>"), and, from a named sender,
//
//	X-Smsorch-Sender: <its name>
//
// A named sender signs with a secret of its own and may start and read
// only the events of its kinds (a key's first part: order, otp); its
// requests spend its own budget, whatever address they come from. A
// timestamp more than
// MaxSkew from the intake's clock is refused. Two secrets may be valid at
// once (the current and the previous), so a secret rotates without a
// refused request. The same signed POST sent again (a sender's retry
// after a lost answer) gets the answer the first got: its signature names
// the start request to Temporal, which recognises it, so no memory is
// kept here and any intake replica answers alike. An unsigned intake
// takes only Content-Type: application/json POSTs, so a browser's
// cross-site form cannot post to it. Each client (by remote address, or
// behind named proxies by the address they add to X-Forwarded-For) gets a
// request rate; past it the answer is 429 with Retry-After. On a signed
// intake the rate counts requests once their signature is checked, and
// those without a valid one have a smaller budget of their own. Errors
// from Temporal are logged, not echoed.
package intake

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/internal/tracing"
	"github.com/acme/smsorch/keys"
	"github.com/acme/smsorch/sms"
	"github.com/acme/smsorch/starter"
)

// SignatureHeader carries the request's HMAC when a secret is
// configured; TimestampHeader the time it was signed.
const (
	SignatureHeader = "X-Smsorch-Signature"
	TimestampHeader = "X-Smsorch-Timestamp"
	// SenderHeader names a named sender (Config.Senders).
	SenderHeader = "X-Smsorch-Sender"
)

// Sender is a system that signs its requests with a secret of its own:
// a shop's webhooks, the login service's one-time codes.
type Sender struct {
	// Name is how its requests say who sent them (SenderHeader), and
	// whose budget they spend.
	Name   string
	Secret logging.Secret
	// Kinds are the event kinds (a key's first part: order, otp) it may
	// start and read; none: every kind.
	Kinds []string
}

// allows says whether the sender may start or read events of kind.
func (s Sender) allows(kind string) bool {
	return len(s.Kinds) == 0 || slices.Contains(s.Kinds, kind)
}

// MaxSkew is how far a request's timestamp may be from the intake's
// clock, either way.
const MaxSkew = 5 * time.Minute

// DefaultRatePerMinute is each client's request budget.
const DefaultRatePerMinute = 600

// UnsignedPerMinute is each client's budget for requests without a valid
// signature, when the intake takes signed requests only: kept apart from
// the signed senders' budget, so that a flood of unsigned requests from
// an address (or through a proxy) cannot spend the budget of the real
// senders behind it.
const UnsignedPerMinute = 60

// DefaultMaxBody bounds a request body; an event is a few hundred bytes.
const DefaultMaxBody = 64 << 10

// Config configures the handler.
type Config struct {
	// Secrets, when any is set, make the signature header mandatory; a
	// request signed with any of them is accepted (the current secret
	// and the previous one, while senders move to the new one).
	Secrets []logging.Secret
	// Senders are named senders, each with its own secret and kinds; a
	// name given twice has two secrets (one being retired). Either these
	// or Secrets make the signature mandatory.
	Senders []Sender
	// Proxies are the addresses of the reverse proxies in front of the
	// intake. A request from one of them is keyed by the client address
	// the proxy adds to X-Forwarded-For; a request from any other
	// non-loopback address is refused. None: every request is keyed by
	// its remote address.
	Proxies []*net.IPNet
	// MaxBody bounds the request body; default DefaultMaxBody.
	MaxBody int64
	// Timeout bounds the work of one request; default 30 s.
	Timeout time.Duration
	// RatePerMinute is each client's request budget (by remote address),
	// with bursts of a tenth of it; default DefaultRatePerMinute,
	// negative for none. With Secrets set, it counts authenticated
	// requests only, after their signature is checked; the others have
	// a budget of their own (UnsignedPerMinute, or RatePerMinute if
	// lower).
	RatePerMinute int
	// Now is the clock signatures are checked against; default time.Now.
	Now    func() time.Time
	Logger *zap.Logger
	// Refused, when set, is told the code of every request the intake
	// answers with an error ("unauthorized", "stale", "rate_limited",
	// "invalid", …): the worker counts them for its alerts.
	Refused func(code string)
}

type handler struct {
	s   *starter.Starter
	cfg Config
	// senders are every secret that authenticates: the named senders',
	// and the shared secrets as senders without a name or kinds.
	senders []Sender
	clients *clientLimits
	// named is the named senders' budgets, by name: apart from the
	// clients', so that no client address can be made to look like one.
	named *clientLimits
	// unsigned is the budget of requests without a valid signature.
	unsigned *clientLimits
}

// New returns the intake's HTTP handler.
func New(s *starter.Starter, cfg Config) http.Handler {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RatePerMinute == 0 {
		cfg.RatePerMinute = DefaultRatePerMinute
	}
	unsigned := min(cfg.RatePerMinute, UnsignedPerMinute)
	h := &handler{s: s, cfg: cfg,
		clients: newClientLimits(cfg.RatePerMinute, float64(cfg.RatePerMinute)/10),
		named:   newClientLimits(cfg.RatePerMinute, float64(cfg.RatePerMinute)/10),
		// A sender with a wrong secret sees a minute's worth of 401s,
		// with what to fix, before any 429.
		unsigned: newClientLimits(unsigned, float64(unsigned)),
	}
	for _, sec := range cfg.Secrets {
		if sec != "" {
			h.senders = append(h.senders, Sender{Secret: sec})
		}
	}
	h.senders = append(h.senders, cfg.Senders...)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/events", h.limited(h.post))
	mux.HandleFunc("GET /v1/events/{key}", h.limited(h.get))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	// Each request is a span, the root of the event's trace or the child
	// of the sender's traceparent.
	return tracing.Handler(mux, "intake")
}

// limited refuses a request that came around the proxies. On an intake
// that takes unsigned requests it also answers 429 with Retry-After to a
// client past its rate; on a signed one, admit does that once it knows
// whose budget the request spends.
func (h *handler) limited(next func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		client, ok := h.clientOf(r)
		if !ok {
			h.fail(w, r, http.StatusForbidden, "not_via_proxy", "", "this intake takes requests through its proxy only: send to the proxy's address")
			return
		}
		if len(h.senders) == 0 && !h.spend(w, r, h.clients, client, "") {
			return
		}
		next(w, r, client)
	}
}

// spend takes one request from client's budget in limits, or answers 429
// with Retry-After and returns false.
func (h *handler) spend(w http.ResponseWriter, r *http.Request, limits *clientLimits, client, what string) bool {
	wait, ok := limits.allow(client, h.cfg.Now())
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		h.fail(w, r, http.StatusTooManyRequests, "rate_limited", "", fmt.Sprintf("more than %d %srequests a minute from this client: wait and send again (the event's key makes a retry safe)", limits.perMinute, what))
	}
	return ok
}

// admit checks the timestamp and the signature of what was signed (the
// body, or the method and path), then spends the request from its
// sender's budget: a named sender's own, else its client's among the
// signed senders, or, for a request without a valid signature, the
// budget of those. It answers and returns false when the request must
// stop here; else it returns who signed (no one on an unsigned intake).
func (h *handler) admit(w http.ResponseWriter, r *http.Request, client string, signed []byte) (Sender, bool) {
	if len(h.senders) == 0 {
		return Sender{}, true // limited spent the request already
	}
	sender, code, msg := h.refusal(r, signed)
	if code == "" {
		if sender.Name != "" {
			return sender, h.spend(w, r, h.named, sender.Name, "")
		}
		return sender, h.spend(w, r, h.clients, client, "")
	}
	if h.spend(w, r, h.unsigned, client, "unauthenticated ") {
		h.fail(w, r, http.StatusUnauthorized, code, "", msg)
	}
	return Sender{}, false
}

// refusal says why the request's signature does not authenticate it: a
// code and what to do; no code and the sender when it does.
func (h *handler) refusal(r *http.Request, signed []byte) (sender Sender, code, msg string) {
	ts := strings.TrimSpace(r.Header.Get(TimestampHeader))
	sig := strings.TrimSpace(r.Header.Get(SignatureHeader))
	name := strings.TrimSpace(r.Header.Get(SenderHeader))
	secs, err := strconv.ParseInt(ts, 10, 64)
	now := h.cfg.Now()
	switch {
	case err != nil:
		return sender, "unauthorized", fmt.Sprintf("missing or unreadable %s: send the Unix time in seconds at which you signed, and %s: sha256=<hex HMAC-SHA256 of \"<timestamp>.<body>\" with the shared secret>", TimestampHeader, SignatureHeader)
	case abs(now.Unix()-secs) > int64(MaxSkew/time.Second):
		// In whole seconds: a far-off value (milliseconds, say) cannot
		// overflow a Duration into passing.
		return sender, "stale", fmt.Sprintf("%s is %d s from the intake's clock (at most %s): sign again with the current Unix time in seconds, and check the sender's clock", TimestampHeader, abs(now.Unix()-secs), MaxSkew)
	}
	// Every secret is tried, whatever the name: the time taken does not
	// tell which names exist.
	found := -1
	for i, s := range h.senders {
		if hmac.Equal([]byte(signature(s.Secret, ts, signed)), []byte(sig)) && s.Name == name && found < 0 {
			found = i
		}
	}
	if found >= 0 {
		return h.senders[found], "", ""
	}
	if name != "" {
		return sender, "unauthorized", fmt.Sprintf("missing or wrong %s for the sender in %s: sign with that sender's own secret (sha256=<hex HMAC-SHA256 of \"<timestamp>.<body>\">), or check its name", SignatureHeader, SenderHeader)
	}
	return sender, "unauthorized", fmt.Sprintf("missing or wrong %s: send sha256=<hex HMAC-SHA256 of \"<timestamp>.<body>\" (a GET: \"<timestamp>.GET <path>\") with the shared secret>, or, as a named sender, %s with your name and your own secret", SignatureHeader, SenderHeader)
}

// outOfScope answers 403 and returns true when sender may not start or
// read events of key's kind.
func (h *handler) outOfScope(w http.ResponseWriter, r *http.Request, sender Sender, key keys.Key) bool {
	kind := keys.KindOf(key)
	if sender.allows(kind) {
		return false
	}
	h.fail(w, r, http.StatusForbidden, "forbidden_kind", "key", fmt.Sprintf("the sender %s may start and read events of the kinds %s, not %q: sign as the sender of that kind", sender.Name, strings.Join(sender.Kinds, ", "), kind))
	return true
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// clientLimits is a token bucket per client.
type clientLimits struct {
	mu        sync.Mutex
	perMinute int
	perSec    float64
	burst     float64
	buckets   map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// newClientLimits gives each client perMinute requests a minute, burst
// of them at once; nil (no limit) for a negative perMinute.
func newClientLimits(perMinute int, burst float64) *clientLimits {
	if perMinute < 0 {
		return nil
	}
	return &clientLimits{perMinute: perMinute, perSec: float64(perMinute) / 60, burst: max(1, burst), buckets: map[string]*bucket{}}
}

// allow takes a token for client, or says how long until one is free.
func (c *clientLimits) allow(client string, now time.Time) (time.Duration, bool) {
	if c == nil {
		return 0, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.buckets[client]
	if !ok {
		if len(c.buckets) > 100_000 { // forget idle clients rather than grow without bound
			for k, v := range c.buckets {
				if now.Sub(v.last) > time.Minute {
					delete(c.buckets, k)
				}
			}
		}
		b = &bucket{tokens: c.burst, last: now}
		c.buckets[client] = b
	}
	b.tokens = min(c.burst, b.tokens+now.Sub(b.last).Seconds()*c.perSec)
	b.last = now
	if b.tokens < 1 {
		return time.Duration((1 - b.tokens) / c.perSec * float64(time.Second)), false
	}
	b.tokens--
	return 0, true
}

// clientOf is the address that keys the client's rate: the remote
// address without its port, or, for a request from one of the proxies,
// the rightmost address in X-Forwarded-For that is not a proxy of ours
// (those before it are the client's word). ok is false for a request
// that came around the proxies: from another address that is not
// loopback.
func (h *handler) clientOf(r *http.Request) (client string, ok bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if len(h.cfg.Proxies) == 0 {
		return host, true
	}
	ip := net.ParseIP(host)
	if h.proxy(ip) {
		var hops []string
		for _, v := range r.Header.Values("X-Forwarded-For") {
			hops = append(hops, strings.Split(v, ",")...)
		}
		for i := len(hops) - 1; i >= 0; i-- {
			hop := strings.TrimSpace(hops[i])
			if hop == "" {
				continue
			}
			if !h.proxy(net.ParseIP(hop)) {
				return hop, true
			}
		}
		return host, true
	}
	if ip != nil && ip.IsLoopback() {
		return host, true // a health check, or a process on this host
	}
	return host, false
}

// proxy reports whether ip is one of the named proxies.
func (h *handler) proxy(ip net.IP) bool {
	for _, p := range h.cfg.Proxies {
		if ip != nil && p.Contains(ip) {
			return true
		}
	}
	return false
}

// Problem is the body of every error answer.
type Problem struct {
	Error struct {
		Code    string `json:"code"`
		Field   string `json:"field,omitempty"`
		Message string `json:"message"`
	} `json:"error"`
}

func (h *handler) fail(w http.ResponseWriter, r *http.Request, status int, code, field, msg string) {
	tracing.Annotate(r.Context(), tracing.Answer.String(code))
	if h.cfg.Refused != nil {
		h.cfg.Refused(code)
	}
	var p Problem
	p.Error.Code, p.Error.Field, p.Error.Message = code, field, msg
	writeJSON(w, status, p)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (h *handler) post(w http.ResponseWriter, r *http.Request, client string) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	// An unsigned intake takes JSON only: a browser's cross-site form
	// (text/plain, form-encoded) cannot then post an event to it. A
	// signed request cannot come from such a form, and refusing it for a
	// header would lose an event its sender authenticated.
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); len(h.senders) == 0 && (err != nil || mt != "application/json") {
		h.fail(w, r, http.StatusUnsupportedMediaType, "content_type", "", "send the event as JSON with the header Content-Type: application/json")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
	var tooBig *http.MaxBytesError
	// A body that cannot be read spends no budget: its answer says what
	// to fix, which a 429 would hide, and reading it cost no more than
	// reading one that can.
	switch {
	case errors.As(err, &tooBig):
		h.fail(w, r, http.StatusRequestEntityTooLarge, "too_large", "", fmt.Sprintf("the body is larger than %d bytes; an event is a few hundred", h.cfg.MaxBody))
		return
	case err != nil:
		h.fail(w, r, http.StatusBadRequest, "bad_body", "", "could not read the body: "+err.Error())
		return
	}
	sender, ok := h.admit(w, r, client, body)
	if !ok {
		return
	}
	e, err := decodeEvent(body)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "bad_json", "", "the body is not an event: "+err.Error()+
			`; send {"kind":"order","id":"58213","stage":"shipped","to":"+31612345678","text":"…","provider":"bird"}`)
		return
	}
	// A key that does not parse is the starter's to refuse, saying why.
	if key, err := e.EventKey(); err == nil && h.outOfScope(w, r, sender, key) {
		return
	}
	// The same signed request again is the same start request to
	// Temporal, which answers it as it answered the first.
	requestID := ""
	if sig := strings.TrimSpace(r.Header.Get(SignatureHeader)); len(h.senders) > 0 && sig != "" {
		sum := sha256.Sum256([]byte(r.Header.Get(TimestampHeader) + "\n" + sig))
		requestID = "intake-" + hex.EncodeToString(sum[:16])
	}
	res, err := h.s.SendRequest(ctx, e, requestID)
	if res.Key != "" {
		tracing.Annotate(ctx, tracing.EventKey.String(res.Key))
	}
	log := h.cfg.Logger.With(zap.String("key", res.Key), zap.String("to", sms.MaskPhone(strings.TrimSpace(e.To))), tracing.LogTraceID(ctx))
	var ie *starter.InvalidError
	var ce *starter.ConflictError
	switch {
	case errors.As(err, &ie):
		log.Info("intake refused an invalid event", zap.String("field", ie.Field), zap.Error(err))
		h.fail(w, r, http.StatusBadRequest, "invalid", ie.Field, err.Error())
	case errors.As(err, &ce):
		log.Warn("intake refused a conflicting event", zap.Error(err))
		h.fail(w, r, http.StatusConflict, "conflict", ce.Field, err.Error())
	case err != nil:
		// The caller learns what to do; the cause, which may name our
		// Temporal cluster, stays in our log.
		log.Error("intake could not start an event", zap.Error(err))
		h.fail(w, r, http.StatusServiceUnavailable, "unavailable", "", "the event could not be started right now: send the same event again (its key makes retries safe)")
	case res.Started:
		tracing.Annotate(ctx, tracing.Answer.String("started"))
		log.Info("intake started an event", zap.String("run", res.RunID))
		writeJSON(w, http.StatusAccepted, res)
	default:
		tracing.Annotate(ctx, tracing.Answer.String("existing"))
		log.Info("intake found the event's run", zap.String("run", res.RunID), zap.String("state", string(res.State)))
		writeJSON(w, http.StatusOK, res)
	}
}

func (h *handler) get(w http.ResponseWriter, r *http.Request, client string) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	sender, ok := h.admit(w, r, client, []byte(http.MethodGet+" "+r.URL.EscapedPath()))
	if !ok || h.outOfScope(w, r, sender, keys.Key(r.PathValue("key"))) {
		return
	}
	st, err := h.s.Status(ctx, r.PathValue("key"))
	var ie *starter.InvalidError
	switch {
	case errors.As(err, &ie):
		h.fail(w, r, http.StatusBadRequest, "invalid", ie.Field, err.Error())
	case errors.Is(err, starter.ErrNotFound):
		h.fail(w, r, http.StatusNotFound, "not_found", "", err.Error())
	case err != nil:
		h.cfg.Logger.Error("intake could not read a run", zap.String("key", r.PathValue("key")), zap.Error(err))
		h.fail(w, r, http.StatusServiceUnavailable, "unavailable", "", "the run could not be read right now: ask again")
	default:
		writeJSON(w, http.StatusOK, st)
	}
}

// Sign returns the headers a sender adds to a request signed at t: for a
// POST, signed is the raw body; for a GET, "GET <path>".
func Sign(secret logging.Secret, t time.Time, signed []byte) map[string]string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return map[string]string{TimestampHeader: ts, SignatureHeader: signature(secret, ts, signed)}
}

// SignAs returns the headers a named sender adds to a request signed at
// t with its own secret.
func SignAs(name string, secret logging.Secret, t time.Time, signed []byte) map[string]string {
	h := Sign(secret, t, signed)
	h[SenderHeader] = name
	return h
}

func signature(secret logging.Secret, ts string, signed []byte) string {
	m := hmac.New(sha256.New, []byte(secret.Reveal()))
	m.Write([]byte(ts + "."))
	m.Write(signed)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Timeouts of the intake's HTTP server: a client that sends its headers
// or its body slowly, or keeps an idle connection, is cut off.
const (
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = 30 * time.Second
	WriteTimeout      = 45 * time.Second // the handler's own bound is 30 s
	IdleTimeout       = 2 * time.Minute
)

// NewServer is the intake's HTTP server around h, with the timeouts.
func NewServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: ReadHeaderTimeout, ReadTimeout: ReadTimeout, WriteTimeout: WriteTimeout, IdleTimeout: IdleTimeout}
}
