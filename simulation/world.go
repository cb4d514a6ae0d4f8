package simulation

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/provider/bird"
	"github.com/acme/smsorch/provider/sendy"
)

// world is everything outside the workflow that one event's lifetime
// touches: the provider simulator, the ledger, the provider clients and
// the activities, all on one clock, the test environment's.
type world struct {
	sc    *Scenario
	clock *clock
	sim   *simulator.Server
	led   *ledger.SQLite
	// dying is the ledger as the workers see it: while one dies in the
	// middle of a Send, its writes after the provider's answer fail.
	dying *dyingLedger
	acts  *activities.Activities
	tr    *transport
	tl    *timeline
	// sendKeys are the keys of the send requests that reached a
	// provider, and when the first did.
	sendKeys map[string]time.Time
}

// clock is the world's time: the running test environment's clock, or,
// while a hung request takes effect, the moment it does.
type clock struct {
	mu       sync.Mutex
	now      func() time.Time
	override time.Time
	// From stepAt on, the world is stepBy ahead of Temporal's clock
	// (Scenario.ClockStep).
	stepAt time.Time
	stepBy time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.override.IsZero() {
		return c.override
	}
	t := c.now().UTC()
	if c.stepBy != 0 && !t.Before(c.stepAt) {
		t = t.Add(c.stepBy)
	}
	return t
}

func (c *clock) set(now func() time.Time) {
	c.mu.Lock()
	c.now = now
	c.mu.Unlock()
}

// at holds the clock at t (zero: lets it run again) and returns what it
// held before.
func (c *clock) at(t time.Time) (prev time.Time) {
	c.mu.Lock()
	prev, c.override = c.override, t
	c.mu.Unlock()
	return prev
}

// Credentials of the simulated providers.
const (
	birdKey    = "sim-bird-key"
	sendyToken = "sim-sendy-token"
	baseURL    = "http://providers.sim"
)

func newWorld(ctx context.Context, sc *Scenario, tl *timeline) (*world, error) {
	w := &world{sc: sc, clock: &clock{now: func() time.Time { return sc.Start }}, tl: tl, sendKeys: map[string]time.Time{}}
	if st := sc.ClockStep; st != nil {
		w.clock.stepAt, w.clock.stepBy = sc.Start.Add(st.At), st.By
	}
	w.tr = &transport{w: w, rng: rand.New(rand.NewPCG(uint64(sc.Seed), 0xfa17)), stall: rand.New(rand.NewPCG(uint64(sc.Seed), 0x57a12)), asleep: make(chan *sleeper)}
	ids := rand.New(rand.NewPCG(uint64(sc.Seed), 0x1d5))
	sim, err := simulator.New(simulator.Config{
		BirdAccessKey: birdKey, SendyToken: sendyToken,
		FailRate: sc.FailRate, UndeliveredRate: sc.UndeliveredRate,
		DeliveryDelay:  sc.DeliveryDelay,
		SendyRateLimit: -1, // a 429 comes from the scenario's faults
		SendyRetention: sc.SendyRetention,
		Seed:           uint64(sc.Seed),
		Clock:          w.clock.Now,
		Sleep:          w.tr.sleep,
		NewID: func() string {
			u, _ := uuid.NewRandomFromReader(readerOf(ids))
			return u.String()
		},
	})
	if err != nil {
		return nil, err
	}
	w.sim = sim
	w.tr.handler = sim.Handler()
	led, err := ledger.OpenSQLite(ctx, ":memory:")
	if err != nil {
		return nil, err
	}
	led.SetClock(w.clock.Now)
	w.led = led
	w.dying = &dyingLedger{SQLite: led}
	hc := &http.Client{Transport: w.tr}
	bc, err := bird.New(bird.Config{BaseURL: baseURL, AccessKey: logging.Secret(birdKey), WorkspaceID: simulator.DevWorkspace, ChannelID: simulator.DevChannel, HTTPClient: hc})
	if err != nil {
		return nil, err
	}
	sc2, err := sendy.New(sendy.Config{BaseURL: baseURL, Token: logging.Secret(sendyToken), Sender: "ACME", HTTPClient: hc})
	if err != nil {
		return nil, err
	}
	policies := map[provider.Name]activities.Policy{}
	for _, p := range provider.Names {
		pol := sc.Policy
		// As a fleet has it by default: Sendy's lookups are held to its
		// rate limit, Bird's are not, so the runs wait for the first
		// lookup both ways (a timer, the lookup's own first attempt).
		pol.LookupsPaced = p == provider.Sendy
		policies[p] = pol
	}
	w.acts = &activities.Activities{
		Providers: map[provider.Name]provider.Client{provider.Bird: bc, provider.Sendy: sc2},
		Policies:  policies,
		Ledger:    w.dying,
		Now:       w.clock.Now,
		// Activities take no time here: a Send's first look (FirstLook)
		// looks at the moment of the acceptance, when no scenario's
		// message is delivered yet, so the run tracks delivery itself.
		Sleep: func(context.Context, time.Duration) error { return nil },
	}
	return w, nil
}

func (w *world) close() {
	w.tr.wake(time.Time{}, true)
	_ = w.led.Close()
}

// dyingLedger is the ledger as a worker sees it: while the worker dies
// in the middle of a Send (Cut.MidSend), after the provider acted and
// before the answer was written, every write after the attempt's start
// fails, so the attempt's row stays open, as the process's death leaves
// it.
// It also counts the writes that can change the event's outcome and
// messages (Settle, Record), so the check of the record reads it only
// after one (lifetime.watchLedger).
type dyingLedger struct {
	*ledger.SQLite
	mu     sync.Mutex
	dead   bool
	writes int
}

var errWorkerDied = errors.New("simulated: the worker died before this write")

func (l *dyingLedger) died(dead bool) {
	l.mu.Lock()
	l.dead = dead
	l.mu.Unlock()
}

func (l *dyingLedger) isDead() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dead
}

// recordWrite reports whether a write of the event's record may go on
// (the worker is alive), counting it.
func (l *dyingLedger) recordWrite() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.dead {
		l.writes++
	}
	return !l.dead
}

// recordWrites is how many writes of the event's record went on.
func (l *dyingLedger) recordWrites() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writes
}

func (l *dyingLedger) EndAttempt(ctx context.Context, a ledger.Attempt) error {
	if l.isDead() {
		return errWorkerDied
	}
	return l.SQLite.EndAttempt(ctx, a)
}

func (l *dyingLedger) Settle(ctx context.Context, key, outcome, reason, messageID string, at time.Time) (ledger.Event, error) {
	if !l.recordWrite() {
		return ledger.Event{}, errWorkerDied
	}
	return l.SQLite.Settle(ctx, key, outcome, reason, messageID, at)
}

func (l *dyingLedger) Record(ctx context.Context, key string, messageIDs, findings []string) (ledger.Event, error) {
	if !l.recordWrite() {
		return ledger.Event{}, errWorkerDied
	}
	return l.SQLite.Record(ctx, key, messageIDs, findings)
}

// readerOf turns a seeded generator into the byte stream uuid wants.
func readerOf(r *rand.Rand) io.Reader { return rngReader{r} }

type rngReader struct{ r *rand.Rand }

func (x rngReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(x.r.Uint32())
	}
	return len(p), nil
}

// transport carries the clients' requests to the simulator in memory,
// one at a time, and injects the scenario's faults: send faults through
// the simulator's own fault rules (so its contract logic answers them),
// failed lookups and searches as transport errors, a rotated credential
// as the provider's 401. A request that hangs sleeps in the simulator
// until the world's clock passes its end; the client meanwhile gets
// its timeout at once.
type transport struct {
	w       *world
	handler http.Handler
	rng     *rand.Rand
	// stall draws which sends without a fault make a message whose
	// delivery stalls (Scenario.StallShare), apart from rng's draws.
	stall *rand.Rand

	mu       sync.Mutex
	asleep   chan *sleeper
	sleepers []*sleeper
	// hung are the Sendy keys a sleeping request holds: Sendy makes a
	// retry wait for it, which the client sees as its timeout.
	hung map[string]bool
	// dark: until then no lookup or search answers (Scenario.DarkAgain).
	dark time.Time
	// landing: the send Scenario.Landing hangs has been made.
	landing bool
	// landed are the hung requests that took effect, in order.
	landed []landing
	// sends counts the send requests the runs made, those the network
	// lost on the way included.
	sends int
}

type sleeper struct {
	wake, arrived time.Time
	ch, done      chan struct{}
	provider      string
	key           string
}

// landing is a hung request that took effect: it reached the provider
// at arrived and acted at wake.
type landing struct {
	provider, key  string
	arrived, acted time.Time
}

// darkUntil takes the records dark until t.
func (t *transport) darkUntil(until time.Time) {
	t.mu.Lock()
	t.dark = until
	t.mu.Unlock()
}

// landedFrom finds the hung request that made message m, where it
// reached the provider before t.
func (t *transport) landedFrom(m simulator.Message, before time.Time) (landing, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range t.landed {
		if l.provider == m.Provider && l.key == m.Key && l.arrived.Before(before) &&
			!m.CreatedAt.Before(l.acted.Add(-time.Millisecond)) && !m.CreatedAt.After(l.acted.Add(time.Millisecond)) {
			return l, true
		}
	}
	return landing{}, false
}

// sleep is the simulator's Sleep hook: a hung request reports itself and
// waits until the transport wakes it.
func (t *transport) sleep(d time.Duration) {
	s := &sleeper{wake: t.w.clock.Now().Add(d), ch: make(chan struct{})}
	t.asleep <- s
	<-s.ch
}

// wake lets every hung request whose end has come take effect, in the
// order of their ends, each at its own moment; all of them when all.
func (t *transport) wake(now time.Time, all bool) {
	sort.SliceStable(t.sleepers, func(i, j int) bool { return t.sleepers[i].wake.Before(t.sleepers[j].wake) })
	for len(t.sleepers) > 0 && (all || !t.sleepers[0].wake.After(now)) {
		s := t.sleepers[0]
		t.sleepers = t.sleepers[1:]
		// (A late zombie's request holds the clock at its own moment:
		// it runs again from there, not from the environment's end.)
		held := t.w.clock.at(s.wake)
		t.w.tl.add(s.wake, "provider", "%s: the hung request under %s takes effect", s.provider, s.key)
		close(s.ch)
		<-s.done
		t.w.clock.at(held)
		t.landed = append(t.landed, landing{provider: s.provider, key: s.key, arrived: s.arrived, acted: s.wake})
		if s.provider == simulator.Sendy {
			delete(t.hung, s.key)
		}
	}
}

// timeoutError is what the client sees when the provider does not answer
// within its timeout.
type timeoutError struct{ what string }

func (e timeoutError) Error() string   { return "simulated: " + e.what }
func (e timeoutError) Timeout() bool   { return true }
func (e timeoutError) Temporary() bool { return true }

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.w.clock.Now()
	t.wake(now, false)
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		_ = req.Body.Close()
	}
	prov := simulator.Bird
	if strings.HasPrefix(req.URL.Path, "/api/") {
		prov = simulator.Sendy
	}
	key := req.Header.Get("Idempotency-Key")
	send := req.Method == http.MethodPost
	what := "lookup"
	if send {
		what = "send " + key
	} else if req.URL.RawQuery != "" {
		what = "search"
	}
	sc := t.w.sc
	h := req.Header.Clone()
	dark := false // a send whose answer the network loses (Scenario.SendsDark)
	if sc.rotated(now) {
		// The provider's credential was rotated and the worker still
		// holds the old one.
		if prov == simulator.Bird {
			h.Set("Authorization", "AccessKey rotated-away")
		} else {
			h.Set("Authorization", "Bearer rotated-away")
		}
	} else if send {
		if prov == simulator.Sendy && t.hung[key] {
			t.w.tl.add(now, "provider", "%s: %s waits behind the hung request (client timeout)", prov, what)
			return nil, timeoutError{"the provider did not answer in time"}
		}
		since := now.Sub(sc.Start)
		hangLast := false
		if l := sc.Landing; l != nil && prov == sc.Input.Provider && key == sc.Input.Key {
			if since < l.At {
				t.sends++
				t.w.tl.add(now, "provider", "%s: %s: lost on the way, nothing reached the provider (no answer)", prov, what)
				return nil, timeoutError{"the provider did not answer in time"}
			}
			hangLast, t.landing = !t.landing, true
		}
		if _, again := t.w.sendKeys[key]; sc.Unheard.has(since) {
			if again {
				t.sends++
				t.w.tl.add(now, "provider", "%s: %s: lost on the way, nothing reached the provider (no answer)", prov, what)
				return nil, timeoutError{"the provider did not answer in time"}
			}
			dark = true
		} else if relapsed := sc.Relapse.sendsDark(since); sc.SendsDark.has(since) || relapsed {
			// (Before a relapse, every request of the first round is
			// lost on the way: Scenario.Relapse.)
			if t.rng.IntN(2) == 0 || (sc.Relapse != nil && !relapsed) {
				t.sends++ // made, though it never arrived: the client cannot tell
				t.w.tl.add(now, "provider", "%s: %s: lost on the way, nothing reached the provider (no answer)", prov, what)
				return nil, timeoutError{"the provider did not answer in time"}
			}
			dark = true
		}
		t.sends++
		if _, seen := t.w.sendKeys[key]; !seen {
			t.w.sendKeys[key] = now
		}
		if dark {
			// The network loses the answer: no fault of the provider's too.
		} else if hangLast {
			_ = t.w.sim.AddFault(simulator.Fault{Kind: simulator.Hang, Provider: prov, Key: key, Count: 1, Delay: simulator.Duration(sc.Landing.Delay)})
		} else if f, d := sc.sendFault(t.rng, prov); f != "" {
			_ = t.w.sim.AddFault(simulator.Fault{Kind: f, Provider: prov, Key: key, Count: 1, Delay: simulator.Duration(d)})
		} else if sc.StallShare > 0 && t.stall.Float64() < sc.StallShare {
			d := 20*time.Hour + time.Duration(t.stall.Int64N(int64(10*time.Hour)))
			_ = t.w.sim.AddFault(simulator.Fault{Kind: simulator.SlowDelivery, Provider: prov, Key: key, Count: 1, Delay: simulator.Duration(d)})
		}
	} else if now.Before(t.dark) || t.rng.Float64() < sc.readFaultAt(now) {
		t.w.tl.add(now, "provider", "%s: %s fails (no answer)", prov, what)
		return nil, timeoutError{"the provider did not answer the lookup"}
	}
	target := req.URL.String()
	if id := path.Base(req.URL.Path); !send && req.URL.RawQuery == "" && sc.lost(id) {
		// The provider lost its record of the id: its own "not found".
		t.w.tl.add(now, "provider", "%s: lookup of %s -> 404 (the provider lost its record)", prov, id)
		target = strings.TrimSuffix(req.URL.Path, id) + "lost-" + id
	}
	sreq := httptest.NewRequest(req.Method, target, bytes.NewReader(body))
	sreq.Header = h
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	var dropped bool
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				if r != http.ErrAbortHandler {
					panic(r)
				}
				dropped = true
			}
		}()
		t.handler.ServeHTTP(rec, sreq)
	}()
	select {
	case <-done:
	case s := <-t.asleep:
		s.done, s.provider, s.key, s.arrived = done, prov, key, now
		t.sleepers = append(t.sleepers, s)
		if prov == simulator.Sendy {
			if t.hung == nil {
				t.hung = map[string]bool{}
			}
			t.hung[key] = true
		}
		t.w.sim.ClearFaults()
		t.w.tl.add(now, "provider", "%s: %s hangs until %s (client timeout)", prov, what, at(sc, s.wake))
		return nil, timeoutError{"the provider did not answer in time"}
	}
	t.w.sim.ClearFaults()
	if dropped {
		t.w.tl.add(now, "provider", "%s: %s: connection dropped after the provider acted", prov, what)
		return nil, errors.New("simulated: connection closed without an answer")
	}
	resp := rec.Result()
	if dark {
		t.w.tl.add(now, "provider", "%s: %s -> %d%s, lost on the way back (no answer)", prov, what, resp.StatusCode, replayMark(resp))
		return nil, timeoutError{"the provider did not answer in time"}
	}
	if send || resp.StatusCode >= 300 {
		t.w.tl.add(now, "provider", "%s: %s -> %d%s", prov, what, resp.StatusCode, replayMark(resp))
	}
	return resp, nil
}

func replayMark(r *http.Response) string {
	if r.Header.Get("Idempotency-Replay") == "true" {
		return " (replay)"
	}
	return ""
}

// at prints a moment as the time since the scenario's start.
func at(sc *Scenario, t time.Time) string {
	return fmt.Sprintf("T+%s", t.Sub(sc.Start).Round(time.Millisecond))
}
