package simulator

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Kind is a fault the simulator can inject into send requests.
type Kind string

// The fault kinds, as docs/providers.md describes the providers' contracts.
const (
	// DropAfterCommit: the send takes effect and its answer is stored for
	// replay, then the connection is closed without an answer.
	DropAfterCommit Kind = "drop_after_commit"
	// Unstored: the send takes effect but storing the answer fails; the
	// client gets a 500 and a retry sends again (the documented duplicate path).
	Unstored Kind = "unstored"
	// Hang: the request holds the in-flight lock and waits Delay (wall
	// clock) before it takes effect, past the client's timeout. Retries
	// meanwhile see 409 E01004 on Bird and wait on Sendy.
	Hang Kind = "hang"
	// LockExpiry: like Hang, but the in-flight lock has already expired, so
	// a retry meanwhile executes too (Bird only: Sendy has no such window).
	LockExpiry Kind = "lock_expiry"
	// Error5xx: a 500 before execution; nothing happens.
	Error5xx Kind = "error_5xx"
	// Committed5xx: the send takes effect and its answer is stored for
	// replay, then the client gets a 500 (Sendy only: its contract says a
	// 5xx may or may not have taken effect; Bird does not store a 5xx
	// answer, which is Unstored). A retry with the key gets the replay.
	Committed5xx Kind = "committed_5xx"
	// Unavailable: a 503 before execution; on Bird with code E01033.
	Unavailable Kind = "unavailable"
	// RateLimit: a 429 with Retry-After: Delay (default 1 s), not processed.
	RateLimit Kind = "rate_limit"
	// InProgress: a 409 E01004, as if a concurrent request held the lock (Bird only).
	InProgress Kind = "in_progress"
	// FailDelivery: the send succeeds, and the message later ends failed.
	FailDelivery Kind = "fail_delivery"
	// Undeliver: the send succeeds, and the message later ends undelivered (Sendy only).
	Undeliver Kind = "undelivered"
	// Unauthorized: a 401 before execution, as when the provider's
	// credential was rotated and the worker still sends the old one.
	Unauthorized Kind = "unauthorized"
	// SlowDelivery: the send succeeds, and the message reaches its final
	// status after Delay instead of the simulator's delivery delay.
	SlowDelivery Kind = "slow_delivery"
	// LookupsDown: a read of the key's messages answers 503 and nothing
	// is read: a lookup of a message under Key, and a page of Bird's list
	// that holds one. Sends are not touched. As an outage of the
	// provider's read API, where a search cannot tell what was sent.
	LookupsDown Kind = "lookups_down"
)

// Kinds lists every fault kind.
var Kinds = []Kind{DropAfterCommit, Unstored, Hang, LockExpiry, Error5xx, Committed5xx, Unavailable, RateLimit, InProgress, FailDelivery, Undeliver, Unauthorized, SlowDelivery, LookupsDown}

// birdOnly and sendyOnly name faults that only one contract defines.
var (
	birdOnly  = map[Kind]bool{LockExpiry: true, InProgress: true}
	sendyOnly = map[Kind]bool{Undeliver: true, Committed5xx: true}
)

// DefaultHang is the wait of Hang and LockExpiry when Delay is zero.
const DefaultHang = 30 * time.Second

// Fault is a rule: inject Kind into matching send requests, either into the
// next Count of them or into each with probability Rate.
type Fault struct {
	Kind Kind `json:"kind"`
	// Provider limits the rule to "bird" or "sendy"; empty means both.
	Provider string `json:"provider,omitempty"`
	// Key limits the rule to requests with this Idempotency-Key.
	Key string `json:"key,omitempty"`
	// Count injects into the next Count matching requests. Zero with Rate
	// 0 means 1.
	Count int `json:"count,omitempty"`
	// Rate injects into each matching request with this probability; the
	// rule stays until cleared.
	Rate float64 `json:"rate,omitempty"`
	// Delay is the wait for Hang and LockExpiry, the Retry-After of
	// RateLimit (whole seconds, at least 1), and the delivery delay of
	// SlowDelivery.
	Delay Duration `json:"delay,omitempty"`
}

// Duration is a time.Duration that reads and writes as "1.5s" in JSON.
type Duration time.Duration

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a Go duration string ("30s") or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: %w (write it like 30s or 1m)", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("duration %s is neither a string like \"30s\" nor a number of seconds", b)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

type rule struct {
	Fault
	left int // requests left for a Count rule
}

// Validate reports a fault that cannot apply, saying why.
func (f Fault) Validate() error {
	known := false
	for _, k := range Kinds {
		known = known || f.Kind == k
	}
	if !known {
		names := make([]string, len(Kinds))
		for i, k := range Kinds {
			names[i] = string(k)
		}
		return fmt.Errorf("fault kind %q is not known: use one of %s", f.Kind, strings.Join(names, ", "))
	}
	switch f.Provider {
	case "", Bird, Sendy:
	default:
		return fmt.Errorf("fault provider %q is not known: use %q, %q or leave it empty for both", f.Provider, Bird, Sendy)
	}
	if birdOnly[f.Kind] && f.Provider != Bird {
		return fmt.Errorf("fault %s exists only in Bird's contract: set provider to %q", f.Kind, Bird)
	}
	if sendyOnly[f.Kind] && f.Provider != Sendy {
		return fmt.Errorf("fault %s exists only in Sendy's contract: set provider to %q", f.Kind, Sendy)
	}
	if f.Rate < 0 || f.Rate > 1 {
		return fmt.Errorf("fault rate %g is not a probability from 0 to 1", f.Rate)
	}
	if f.Count < 0 || (f.Count > 0 && f.Rate > 0) {
		return fmt.Errorf("fault count %d: give either a count of requests or a rate, not both", f.Count)
	}
	if f.Delay < 0 {
		return fmt.Errorf("fault delay %s is negative", time.Duration(f.Delay))
	}
	return nil
}

// AddFault installs a fault rule. Rules are tried in the order added; the
// first that fires applies.
func (s *Server) AddFault(f Fault) error {
	if err := f.Validate(); err != nil {
		return err
	}
	if f.Count == 0 && f.Rate == 0 {
		f.Count = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &rule{Fault: f, left: f.Count})
	return nil
}

// Faults returns the installed rules, with Count set to what is left.
func (s *Server) Faults() []Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Fault, 0, len(s.faults))
	for _, r := range s.faults {
		f := r.Fault
		if f.Rate == 0 {
			f.Count = r.left
		}
		out = append(out, f)
	}
	return out
}

// ClearFaults removes every rule.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// ClearFaultsFor removes the rules limited to key, and no other.
func (s *Server) ClearFaultsFor(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = slices.DeleteFunc(s.faults, func(r *rule) bool { return r.Key == key })
}

// pickFault returns the fault to inject into a send request, if any, and
// uses up one request of a Count rule.
func (s *Server) pickFault(provider, key string) (Kind, time.Duration) {
	return s.pick(provider, key, false)
}

// readFails reports whether a read of a message under key at provider
// fails (a LookupsDown rule matches, and takes its turn).
func (s *Server) readFails(provider, key string) bool {
	k, _ := s.pick(provider, key, true)
	return k == LookupsDown
}

// pick returns the first rule's fault for a request under key at
// provider: among the LookupsDown rules for a read, among the others for
// a send.
func (s *Server) pick(provider, key string, read bool) (Kind, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range s.faults {
		if (r.Provider != "" && r.Provider != provider) || (r.Key != "" && r.Key != key) || (r.Kind == LookupsDown) != read {
			continue
		}
		if r.Rate > 0 {
			if s.rng.Float64() < r.Rate {
				return r.Kind, time.Duration(r.Delay)
			}
			continue
		}
		r.left--
		if r.left <= 0 {
			s.faults = append(s.faults[:i], s.faults[i+1:]...)
		}
		return r.Kind, time.Duration(r.Delay)
	}
	return "", 0
}

// hangFor is how long Hang and LockExpiry wait.
func hangFor(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultHang
	}
	return d
}

// retryAfterSeconds is the Retry-After of a RateLimit fault.
func retryAfterSeconds(d time.Duration) int {
	secs := int((d + time.Second - 1) / time.Second)
	if secs < 1 {
		secs = 1
	}
	return secs
}
