// Package simulator is one HTTP server that plays both SMS providers, Bird
// and Sendy, for tests, demos, benchmarks and fault drills. It follows the
// contracts in docs/providers.md byte for byte where they speak of bytes, keeps
// its own movable clock (replay retention, in-flight locks and delivery
// follow it), injects every fault listed there, and records every request
// and every message it created, so tests count real sends.
//
// It shares no code with the provider clients on purpose: the conformance
// suite runs the clients against it, and that only proves something when
// the two sides were written separately from the contract.
package simulator

import (
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
)

// Defaults from the providers' contracts (docs/providers.md).
const (
	DefaultRetention      = 3 * time.Hour
	DefaultLockExpiry     = 30 * time.Second
	DefaultSendyRateLimit = 60 // requests a minute
	DefaultDeliveryDelay  = 2 * time.Second
	DefaultSendyCredits   = 1_000_000
	DefaultBirdAccessKey  = "sim-bird-access-key"
	DefaultSendyToken     = "sim-sendy-token"
	// DevWorkspace and DevChannel are the Bird workspace and channel the
	// worker's dev mode sends through (the simulator accepts any).
	DevWorkspace = "dev-workspace"
	DevChannel   = "dev-sms-channel"
)

// Config configures a simulator. Zero fields take the defaults above.
type Config struct {
	// BirdAccessKey is the only access key Bird accepts; others get 401.
	BirdAccessKey string
	// SendyToken is the only bearer token Sendy accepts; others get 401.
	SendyToken string
	// BirdRetention and SendyRetention keep completed answers for replay.
	BirdRetention, SendyRetention time.Duration
	// LockExpiry is how long Bird's in-flight lock lives (simulator clock).
	LockExpiry time.Duration
	// SendyRateLimit is requests a minute per token; negative means no limit.
	SendyRateLimit int
	// DeliveryDelay is the time (simulator clock) from acceptance to the
	// final delivery status.
	DeliveryDelay time.Duration
	// FailRate and UndeliveredRate are the shares of messages that end
	// failed or undelivered (Bird has no "undelivered": those end failed).
	FailRate, UndeliveredRate float64
	// SendyCredits is the starting credit balance; a send without credit gets 402.
	SendyCredits int
	// OptOut lists numbers that opted out of marketing messages on Sendy.
	OptOut []string
	// Seed makes fault and delivery rates repeatable.
	Seed uint64
	// Logger receives one line per request (phone numbers masked).
	Logger *zap.Logger

	// Hooks for a deterministic simulation (package simulation), which
	// runs the providers inside the workflow test environment's clock:
	// Clock is the simulator clock's base instead of the wall clock
	// (Advance still moves it); Sleep is how Hang and LockExpiry wait
	// (the simulation decides when a hung request wakes); NewID makes
	// message ids (the same seed, the same ids). Nil means the wall
	// clock, time.Sleep and random UUIDs.
	Clock func() time.Time
	Sleep func(time.Duration)
	NewID func() string
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.BirdRetention, DefaultRetention)
	def(&c.SendyRetention, DefaultRetention)
	def(&c.LockExpiry, DefaultLockExpiry)
	def(&c.DeliveryDelay, DefaultDeliveryDelay)
	if c.BirdAccessKey == "" {
		c.BirdAccessKey = DefaultBirdAccessKey
	}
	if c.SendyToken == "" {
		c.SendyToken = DefaultSendyToken
	}
	if c.SendyRateLimit == 0 {
		c.SendyRateLimit = DefaultSendyRateLimit
	}
	if c.SendyCredits == 0 {
		c.SendyCredits = DefaultSendyCredits
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// Validate reports a config that cannot work, saying which setting to fix.
func (c Config) Validate() error {
	for name, d := range map[string]time.Duration{
		"bird retention": c.BirdRetention, "sendy retention": c.SendyRetention,
		"lock expiry": c.LockExpiry, "delivery delay": c.DeliveryDelay,
	} {
		if d < 0 {
			return fmt.Errorf("simulator: %s %s is negative", name, d)
		}
	}
	if c.FailRate < 0 || c.UndeliveredRate < 0 || c.FailRate+c.UndeliveredRate > 1 {
		return fmt.Errorf("simulator: fail rate %g and undelivered rate %g must be shares from 0 to 1 that add up to at most 1", c.FailRate, c.UndeliveredRate)
	}
	return nil
}

// Provider names as the simulator reports them.
const (
	Bird  = "bird"
	Sendy = "sendy"
)

// Message is a message the simulator created: one real send.
type Message struct {
	Provider string `json:"provider"`
	ID       string `json:"id"`
	// Key is the Idempotency-Key of the request that created it ("" without one).
	Key       string    `json:"key"`
	Workspace string    `json:"workspace,omitempty"`
	Channel   string    `json:"channel,omitempty"`
	To        string    `json:"to"`
	From      string    `json:"from,omitempty"`
	Text      string    `json:"text"`
	Reference string    `json:"reference,omitempty"`
	Mode      string    `json:"mode,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	// Status is the provider's status now, on the simulator clock.
	Status          string `json:"status"`
	Credits         int    `json:"credits,omitempty"`
	CreditsRefunded int    `json:"creditsRefunded,omitempty"`

	final string // the status it ends in after DeliveryDelay
	// deliverIn, when set, replaces DeliveryDelay (a SlowDelivery fault).
	deliverIn time.Duration
}

// Request is one request the simulator received.
type Request struct {
	Seq      int       `json:"seq"`
	At       time.Time `json:"at"`
	Provider string    `json:"provider"`
	Method   string    `json:"method"`
	// Path includes the query string.
	Path string `json:"path"`
	Key  string `json:"key,omitempty"`
	// Traceparent is the W3C trace context the request carried, "" when
	// none: a test follows an event's trace to the provider with it.
	Traceparent string `json:"traceparent,omitempty"`
	// Body is the raw body bytes as received (base64 in JSON); BodyText is
	// the same as text, for people.
	Body     []byte `json:"body,omitempty"`
	BodyText string `json:"bodyText,omitempty"`
	// Status is the answer's status; 0 when the connection was dropped.
	Status    int    `json:"status"`
	Replay    bool   `json:"replay,omitempty"`
	Fault     string `json:"fault,omitempty"`
	MessageID string `json:"messageId,omitempty"`
}

// Server is a running simulator's state and HTTP handler.
type Server struct {
	cfg     Config
	handler http.Handler

	mu        sync.Mutex
	offset    time.Duration // simulator clock = wall clock + offset
	rng       *rand.Rand
	messages  []*Message
	byID      map[string]*Message
	requests  []*Request
	faults    []*rule
	credits   int
	birdStore map[string]*birdRecord // workspace + "/" + key
	birdLocks map[string]*birdLock
	sendy     map[string]*sendyKey // per key: lock and stored answer
	sendyHits []time.Time          // request times in the rate-limit window
}

// New returns a simulator. Serve it with Handler, or use ListenAndServe.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg}
	s.resetLocked()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /workspaces/{workspace}/channels/{channel}/messages", s.birdSend)
	mux.HandleFunc("GET /workspaces/{workspace}/channels/{channel}/messages", s.birdList)
	mux.HandleFunc("GET /workspaces/{workspace}/channels/{channel}/messages/{id}", s.birdGet)
	mux.HandleFunc("POST /api/v1/messages", s.sendySend)
	mux.HandleFunc("GET /api/v1/messages/{id}", s.sendyGet)
	s.adminRoutes(mux)
	s.handler = mux
	return s, nil
}

// Config returns the configuration in effect, defaults applied.
func (s *Server) Config() Config { return s.cfg }

// Handler serves both providers and the /_sim/ admin API.
func (s *Server) Handler() http.Handler { return s.handler }

// Now is the simulator clock.
func (s *Server) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nowLocked()
}

func (s *Server) nowLocked() time.Time {
	base := time.Now
	if s.cfg.Clock != nil {
		base = s.cfg.Clock
	}
	return base().Add(s.offset).UTC()
}

// sleep is how a hung request waits.
func (s *Server) sleep(d time.Duration) {
	if s.cfg.Sleep != nil {
		s.cfg.Sleep(d)
		return
	}
	time.Sleep(d)
}

// newID is a new message id's random part.
func (s *Server) newID() string {
	if s.cfg.NewID != nil {
		return s.cfg.NewID()
	}
	return uuid.NewString()
}

// Advance moves the simulator clock forward (or back, for a negative d).
// Replay records and in-flight locks expire, and deliveries progress, by it.
func (s *Server) Advance(d time.Duration) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offset += d
	return s.nowLocked()
}

// Reset forgets every message, request, replay record, lock and fault,
// restores the credit balance and puts the clock back to the wall clock.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetLocked()
}

func (s *Server) resetLocked() {
	s.offset = 0
	s.rng = rand.New(rand.NewPCG(s.cfg.Seed, s.cfg.Seed^0x5eed))
	s.messages, s.requests, s.faults = nil, nil, nil
	s.byID = map[string]*Message{}
	s.credits = s.cfg.SendyCredits
	s.birdStore = map[string]*birdRecord{}
	s.birdLocks = map[string]*birdLock{}
	s.sendy = map[string]*sendyKey{}
	s.sendyHits = nil
}

// Filter selects messages or requests; empty fields match everything.
type Filter struct {
	Provider string
	// Key matches the Idempotency-Key.
	Key string
}

func (f Filter) match(provider, key string) bool {
	return (f.Provider == "" || f.Provider == provider) && (f.Key == "" || f.Key == key)
}

// Messages returns copies of the messages created, oldest first, with
// their status on the simulator clock.
func (s *Server) Messages(f Filter) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.nowLocked()
	var out []Message
	for _, m := range s.messages {
		if f.match(m.Provider, m.Key) {
			out = append(out, s.viewLocked(m, now))
		}
	}
	return out
}

// Requests returns copies of the requests received, in arrival order.
func (s *Server) Requests(f Filter) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.requests {
		if f.match(r.Provider, r.Key) {
			c := *r
			c.Body = append([]byte(nil), r.Body...)
			out = append(out, c)
		}
	}
	return out
}

// viewLocked returns the message with its status at now: accepted (queued),
// then sending/sent, then the final status once DeliveryDelay has passed.
func (s *Server) viewLocked(m *Message, now time.Time) Message {
	v := *m
	age := now.Sub(m.CreatedAt)
	d := s.cfg.DeliveryDelay
	if m.deliverIn > 0 {
		d = m.deliverIn
	}
	switch {
	case age >= d:
		v.Status = m.final
	case m.Provider == Bird && age >= d/2:
		v.Status = "sent"
	case m.Provider == Bird:
		v.Status = "accepted"
	case age >= 2*d/3:
		v.Status = "sent"
	case age >= d/3:
		v.Status = "sending"
	default:
		v.Status = "queued"
	}
	if m.Provider == Sendy && v.Status == "failed" {
		// Never accepted by the network: refunded automatically.
		v.CreditsRefunded = m.Credits
	}
	return v
}

// record appends a request to the log and returns it for the handler to
// complete.
func (s *Server) record(r *http.Request, provider string, body []byte) *Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	path := r.URL.Path
	if r.URL.RawQuery != "" {
		path += "?" + r.URL.RawQuery
	}
	rec := &Request{
		Seq: len(s.requests) + 1, At: s.nowLocked(), Provider: provider, Method: r.Method, Path: path,
		Key: r.Header.Get("Idempotency-Key"), Body: body, BodyText: string(body), Traceparent: r.Header.Get("Traceparent"),
	}
	s.requests = append(s.requests, rec)
	return rec
}

// finish fills in what a request was answered.
func (s *Server) finish(rec *Request, status int, replay bool, fault Kind, messageID string) {
	s.mu.Lock()
	rec.Status, rec.Replay, rec.Fault, rec.MessageID = status, replay, string(fault), messageID
	s.mu.Unlock()
	s.cfg.Logger.Info("simulator request",
		zap.String("provider", rec.Provider), zap.String("method", rec.Method), zap.String("path", strings.SplitN(rec.Path, "?", 2)[0]),
		zap.String("key", rec.Key), zap.Int("status", status), zap.Bool("replay", replay),
		zap.String("fault", string(fault)), zap.String("message", messageID))
}

// deliverIn is the delivery delay a fault gives a new message (0: the
// simulator's).
func deliverIn(fault Kind, delay time.Duration) time.Duration {
	if fault == SlowDelivery {
		return delay
	}
	return 0
}

// finalStatus draws the status a new message ends in.
func (s *Server) finalStatusLocked(provider string, fault Kind) string {
	switch fault {
	case FailDelivery:
		return "failed"
	case Undeliver:
		return "undelivered"
	}
	x := s.rng.Float64()
	switch {
	case x < s.cfg.FailRate:
		return "failed"
	case x < s.cfg.FailRate+s.cfg.UndeliveredRate && provider == Sendy:
		return "undelivered"
	case x < s.cfg.FailRate+s.cfg.UndeliveredRate:
		return "failed"
	default:
		return "delivered"
	}
}

func (s *Server) addMessageLocked(m *Message) {
	s.messages = append(s.messages, m)
	s.byID[m.ID] = m
}

func writeJSON(w http.ResponseWriter, status int, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
	return b
}

// dropConnection closes the connection without an answer, as a network
// failure after the provider acted would.
func dropConnection(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler) // HTTP/2: abort the stream
}

func sortedByCreated(ms []*Message) {
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].CreatedAt.Before(ms[j].CreatedAt) })
}

// Credentials are the access key and token a simulator accepts. A
// harness that runs production-mode workers against a simulator gives
// both the same fresh ones: a worker outside dev mode refuses the
// published defaults (DefaultBirdAccessKey, DefaultSendyToken).
type Credentials struct{ BirdAccessKey, SendyToken string }

// NewCredentials makes random credentials.
func NewCredentials() Credentials {
	r := func() string {
		b := make([]byte, 16)
		_, _ = crand.Read(b) // never fails (crypto/rand)
		return hex.EncodeToString(b)
	}
	return Credentials{BirdAccessKey: r(), SendyToken: r()}
}

// Env is c as the environment of smssim and of a worker.
func (c Credentials) Env() []string {
	return []string{"BIRD_ACCESS_KEY=" + c.BirdAccessKey, "SENDY_TOKEN=" + c.SendyToken}
}
