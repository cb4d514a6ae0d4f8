package simulation

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/contract"
)

// Scenario is one event's lifetime as a seed decides it: the event, the
// providers, how they fail, what a person decides and when, and what an
// operator does to Temporal. The faults on each request are drawn while
// the run goes, from a generator seeded by the same seed, so the same
// seed makes the same requests meet the same faults.
type Scenario struct {
	Seed  int64
	Start time.Time
	Input contract.Input
	// Policy is both providers' (the replay windows the simulator keeps
	// match it).
	Policy activities.Policy

	// FailRate and UndeliveredRate are the shares of messages that end
	// failed or undelivered; DeliveryDelay is how long delivery takes.
	FailRate, UndeliveredRate float64
	DeliveryDelay             time.Duration
	// SendFaultRate is the share of send requests that meet a fault,
	// drawn from Kinds.
	SendFaultRate float64
	Kinds         []simulator.Kind
	// ReadFaultRate is the share of lookups and searches that get no
	// answer; during an Outage every one does.
	ReadFaultRate float64
	Outage        *Window
	// SendsDark is a stretch in which no send request gets an answer:
	// the network loses it on the way there (nothing happens) or on the
	// way back (the provider acted, a replay included), so a run whose
	// key's window closes in it awaits a decision.
	SendsDark *Window
	// Unheard is a stretch in which a key's first send request reaches
	// the provider and its answer is lost, and every later one is lost
	// on the way: past a retention shorter than the stretch, the first
	// request that is answered makes a second message.
	Unheard *Window
	// Relapse is a second round of it, after the records return: every
	// send dark again (Relapse.Sends, so a resend carried out then has
	// its outcome unknown) and the records dark again at the resend
	// key's window end (Relapse.Reads), so the run awaits a decision a
	// second time while its searches fail. In such a scenario every
	// send of the first round is lost on the way, so that the resend
	// decided in the first wait is carried out.
	Relapse *Relapse
	// Rotation is a time when the provider's credential has been rotated
	// and the worker still sends the old one: every request gets 401.
	Rotation *Window
	// QueueShare is the share of Send activities that wait in the task
	// queue until their budget ends (the fleet's rate limit held them, or
	// no worker polled): no attempt begins, nothing reaches the provider.
	QueueShare float64
	// Slow: the activities take time, each call a seeded duration
	// (simulation.duration), so decisions, deadlines, cancellations and
	// cuts land while a send, a search or a ledger step is in flight.
	Slow bool
	// StallShare is the share of new messages whose delivery stalls for
	// 20 to 30 hours, past the run's 24-hour tracking limit.
	StallShare float64
	// LoseShare is the share of messages whose record the provider loses
	// for a lookup by id: it answers 404 for an id it gave out, while the
	// message goes its way (and Bird's list still holds it).
	LoseShare float64
	// SendyRetention, when set, is how long Sendy really keeps its
	// answers for replay: shorter than the window the workers assume,
	// as an unpublished retention may turn out (docs/providers.md), so
	// an attempt after it makes a new message under the same key.
	SendyRetention time.Duration

	// Looks are the moments a person looks at the run and may decide.
	Looks []Look
	// Aimed are people who decide while a search runs: each takes the
	// run's next search that takes time while it awaits a decision (a
	// search retried after one failed), and decides halfway through it.
	Aimed []Look
	// CancelRequest is when a Temporal cancellation request arrives
	// (zero: none).
	CancelRequest time.Duration
	// Cuts are the moments a worker restarts (its sticky cache gone, the
	// run replays its history) or an operator resets the run to an
	// earlier workflow task (a new run replays part of it).
	Cuts []Cut
	// ResetClosed, when set, is a reset of the run after it closed, At
	// after its end, Back activities before its last (an operator
	// re-running a completed workflow from the web UI).
	ResetClosed *Cut
	// FreshCut, when set, is a reset that cuts the first Send answered
	// with a new message after an attempt of its key without a certain
	// answer (with Unheard, the first Send once the stretch ends, and
	// the worker dies before it writes the answer: MidSend), after its
	// effect and before the run learns of it: the new run's Send gets a
	// replay of that message.
	FreshCut *Cut
	// Landing, when set (Bird with a fallback), loses every send of the
	// event's key on the way until At, and hangs the first one after it
	// (the run's last attempt before the window closes) for Delay, past
	// its client's timeout and within Bird's lock: it takes effect while
	// the run reconciles, and a failover that does not wait until it can
	// no longer take effect leaves a message at the provider it left.
	Landing *Landing
	// ClockStep, when set, steps Temporal's clock back against the
	// world's (the ledger's and the providers'): from At on, the world
	// is By ahead of the runs' timers, as after an NTP step on
	// Temporal's hosts. The runs' own bound on a key's attempts then
	// ends past the provider's replay window; the Send's check, on the
	// ledger's clock from the key's first attempt, must refuse them.
	ClockStep *ClockStep
	// DarkAgain, when set, takes the records dark again for that long
	// right after the first search that answers once the Outage has
	// ended: a cancel that met the message that search found ends
	// without another look to tell the run it went out.
	DarkAgain time.Duration
	// MoveCut, when set, is a reset that cuts the first Status after a
	// move was planned (a failover, or a resend at another provider),
	// before its effect, back Back activities: the new run plans the
	// move again while the message the replaced run sent may stand.
	MoveCut *Cut
	// StartAgain starts the event again after its run closed, as a
	// person would with the Temporal CLI (a new run of the same id).
	StartAgain bool
	// Horizon is how long the world runs: a run still open then must be
	// awaiting a decision.
	Horizon time.Duration
}

// Relapse is the second round of a dark network (Scenario.Relapse).
type Relapse struct{ Sends, Reads Window }

// sendsDark and readsDark report whether d is in the relapse's dark
// sends or reads (false without a relapse).
func (r *Relapse) sendsDark(d time.Duration) bool { return r != nil && r.Sends.has(d) }
func (r *Relapse) readsDark(d time.Duration) bool { return r != nil && r.Reads.has(d) }

// Window is a stretch of simulated time, from the start.
type Window struct{ From, To time.Duration }

// Landing is Scenario.Landing.
type Landing struct{ At, Delay time.Duration }

// ClockStep is Scenario.ClockStep.
type ClockStep struct{ At, By time.Duration }

func (w *Window) has(d time.Duration) bool { return w != nil && d >= w.From && d < w.To }

// Look is a person looking at the run at At: when it awaits a decision
// (or, with Eager, whatever its state) they decide.
type Look struct {
	N     int
	At    time.Duration
	Eager bool
	// late: the person put the decision off until close to the run's
	// decision deadline (segment.look), and decides now.
	late bool
	// aim, for an aimed look (Scenario.Aimed), is the search it takes:
	// the first while the run awaits a decision, the first once the
	// provider answers again after the Outage, or one at or past the
	// decision deadline.
	aim aim
	// cancel: the person cancels, whatever the look's own draw says
	// (aimed at a cancel that meets a message the search finds);
	// resend: they resend, unforced, at the run's provider.
	cancel, resend bool
}

type aim int

const (
	aimFirst aim = iota
	aimBack
	aimDeadline
	aimRelapse
	aimBeforeBack
)

func (a aim) String() string {
	return [...]string{"the first search while it awaits", "the first search once the records are back", "a search in the deadline's last 5 minutes or after it",
		"the first search once the records went dark again", "a search in the 25 minutes before the records come back"}[a]
}

// Cut is a Temporal operation at the Call-th activity call the world
// sees (or, with At, at that time if the run is waiting then).
type Cut struct {
	Call int
	At   time.Duration
	// Reset: a new run replays the history up to an earlier workflow
	// task (Back activities before the cut) and goes on from there;
	// otherwise the same run replays its whole history (a worker
	// restart that dropped the sticky cache).
	Reset bool
	Back  int
	// AfterEffect: the cut comes after the activity did its work and
	// before its result was recorded (the worker died), so the activity
	// runs again.
	AfterEffect bool
	// MidSend: a worker that dies after a Send's effect dies before it
	// recorded the provider's answer, so the attempt's ledger row stays
	// open; with FleetDown no worker takes the Send's retries before its
	// budget ends (the fleet was that one worker, or all of it went).
	MidSend, FleetDown bool
	// Zombie: a reset before an activity's effect leaves that activity
	// running on its worker, as Temporal does (a reset ends the run, not
	// the work in flight): it acts Lag after the reset, for the replaced
	// run, while the new run goes on.
	Zombie bool
	Lag    time.Duration
}

var scenarioStart = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

var (
	birdKinds = []simulator.Kind{
		simulator.DropAfterCommit, simulator.DropAfterCommit, simulator.Unstored, simulator.Hang, simulator.Hang,
		simulator.LockExpiry, simulator.Error5xx, simulator.Unavailable, simulator.Unavailable, simulator.RateLimit,
		simulator.InProgress, simulator.FailDelivery, simulator.Unauthorized,
	}
	// Sendy's contract has no unstored answer: concurrent requests with
	// one key end in one message, with no window for a second. Its 5xx
	// may have taken effect (Committed5xx, the retry then replays).
	sendyKinds = []simulator.Kind{
		simulator.DropAfterCommit, simulator.Committed5xx, simulator.Hang, simulator.Hang,
		simulator.Error5xx, simulator.Unavailable, simulator.RateLimit, simulator.FailDelivery,
		simulator.Undeliver, simulator.Unauthorized,
	}
)

// NewScenario draws the scenario of a seed.
func NewScenario(seed int64) *Scenario {
	r := rand.New(rand.NewPCG(uint64(seed), 0x5ce7a))
	pick := func(xs ...float64) float64 { return xs[r.IntN(len(xs))] }
	sc := &Scenario{Seed: seed, Start: scenarioStart, Policy: activities.DefaultPolicy(), Horizon: 30 * 24 * time.Hour}
	prov, other := "bird", "sendy"
	if r.IntN(3) == 0 {
		prov, other = other, prov
	}
	sc.Input = contract.Input{
		Key:      fmt.Sprintf("order-%d-shipped", seed),
		Provider: prov,
		To:       fmt.Sprintf("+3161%07d", r.IntN(10_000_000)),
		Text:     "Order shipped.",
	}
	if r.IntN(4) == 0 {
		sc.Input.Text = strings.Repeat("Your order is on its way. ", 8) + "😀"
	}
	if r.IntN(5) < 2 {
		sc.Input.Fallback = other
	}
	sc.FailRate = pick(0, 0.1, 0.3)
	sc.UndeliveredRate = pick(0, 0.1)
	sc.DeliveryDelay = time.Duration(1+r.IntN(120)) * time.Second
	sc.SendFaultRate = pick(0, 0.2, 0.5, 0.8, 0.95)
	sc.Kinds = birdKinds
	if prov == "sendy" {
		sc.Kinds = sendyKinds
	}
	if r.IntN(2) == 0 {
		// Some scenarios keep to a few kinds, so rare paths get weight.
		n := 1 + r.IntN(3)
		var ks []simulator.Kind
		for range n {
			ks = append(ks, sc.Kinds[r.IntN(len(sc.Kinds))])
		}
		sc.Kinds = ks
	}
	sc.ReadFaultRate = pick(0, 0, 0.2, 0.6)
	if r.IntN(3) == 0 {
		from := time.Duration(r.IntN(6*60)) * time.Minute
		sc.Outage = &Window{From: from, To: from + time.Duration(10+r.IntN(24*60))*time.Minute}
	}
	if r.IntN(6) == 0 {
		from := time.Duration(r.IntN(5*60)) * time.Minute
		sc.Rotation = &Window{From: from, To: from + time.Duration(1+r.IntN(8*60))*time.Minute}
	}
	looks := r.IntN(6)
	for i := range looks {
		var d time.Duration
		switch r.IntN(4) {
		case 0: // soon after the start
			d = time.Duration(r.IntN(30*60)) * time.Second
		case 1: // around the replay window's end
			d = 2*time.Hour + time.Duration(r.IntN(3*3600))*time.Second
		default: // while a run may await a decision
			d = time.Duration(r.IntN(100*3600)) * time.Second
		}
		sc.Looks = append(sc.Looks, Look{N: i + 1, At: d, Eager: r.IntN(5) == 0})
	}
	if r.IntN(12) == 0 {
		sc.CancelRequest = time.Duration(r.IntN(10*3600)) * time.Second
	}
	cuts := 0
	if r.IntN(3) == 0 {
		cuts = 1 + r.IntN(2)
	}
	call := 0
	for range cuts {
		call += 1 + r.IntN(12)
		c := Cut{Call: call, Reset: r.IntN(2) == 0, AfterEffect: r.IntN(2) == 0}
		if c.Reset {
			c.Back = r.IntN(6)
		}
		if r.IntN(4) == 0 {
			c.Call, c.At = 0, time.Duration(r.IntN(80*3600))*time.Second
		}
		sc.Cuts = append(sc.Cuts, c)
	}
	sc.StartAgain = r.IntN(10) == 0
	// Each drawn from a generator of its own, so the draws above, and
	// with them every seed's scenario, stay what they were before it.
	z := rand.New(rand.NewPCG(uint64(seed), 0x2011b))
	for i := range sc.Cuts {
		c := &sc.Cuts[i]
		switch {
		case c.AfterEffect && c.Call > 0:
			c.MidSend = z.IntN(2) == 0
			c.FleetDown = c.MidSend && z.IntN(2) == 0
		case c.Reset && c.Call > 0:
			c.Zombie = z.IntN(3) > 0
			// Most within the activity's first seconds, some late in its
			// start-to-close timeout (a Send's attempt, a search's 2
			// minutes): the segment caps it at the activity's own.
			c.Lag = time.Duration(1+z.IntN(3_000)) * time.Millisecond
			if z.IntN(3) == 0 {
				c.Lag = time.Duration(1+z.IntN(120)) * time.Second
			}
		}
	}
	// Drawn from a generator of its own, so the draws above, and with
	// them every seed's scenario, stay what they were before it.
	q := rand.New(rand.NewPCG(uint64(seed), 0x9e7e))
	if q.IntN(5) == 0 {
		sc.QueueShare = []float64{0.3, 0.7, 1}[q.IntN(3)]
	}
	sc.Slow = rand.New(rand.NewPCG(uint64(seed), 0x5107)).IntN(2) == 0
	if rand.New(rand.NewPCG(uint64(seed), 0x57a11)).IntN(4) == 0 {
		sc.StallShare = 0.3
	}
	if rand.New(rand.NewPCG(uint64(seed), 0x1057)).IntN(6) == 0 {
		sc.LoseShare = 0.5
	}
	if c := rand.New(rand.NewPCG(uint64(seed), 0xc105ed)); c.IntN(6) == 0 {
		sc.ResetClosed = &Cut{Reset: true, Back: c.IntN(6), At: time.Duration(1+c.IntN(48*60)) * time.Minute}
	}
	if a := rand.New(rand.NewPCG(uint64(seed), 0xa1bed)); sc.Slow && a.IntN(2) == 0 {
		for i := range 1 + a.IntN(3) {
			sc.Aimed = append(sc.Aimed, Look{N: 10 + i, late: true, aim: aim(a.IntN(3))})
		}
		if a.IntN(2) == 0 {
			// The provider's records go dark around the window's end,
			// for hours or past the decision deadline, while sends may
			// have taken effect unseen: the run awaits a decision and
			// searches again every ReconcileRetry.
			from := 2*time.Hour + time.Duration(a.IntN(60))*time.Minute
			sc.Outage = &Window{From: from, To: from + time.Duration(30+a.IntN(100*60))*time.Minute}
			sc.SendFaultRate = max(sc.SendFaultRate, 0.5)
			// Half of them with every send dark from the start until
			// after the records go dark: the key's window closes with
			// the outcome unknown, so the run awaits a decision while
			// its searches fail and are retried, which the aimed looks
			// need (a generator of its own keeps the other draws).
			if d := rand.New(rand.NewPCG(uint64(seed), 0xda4c)); d.IntN(2) == 0 {
				// Half the looks aimed at the records' return cancel:
				// a cancel that meets the message the search finds.
				for i := range sc.Aimed {
					sc.Aimed[i].cancel = sc.Aimed[i].aim == aimBack && d.IntN(2) == 0
				}
				// And in half of them a person cancels shortly before
				// the records come back: the run ends Cancelled, and its
				// last look, retried until the records answer, finds the
				// message a lost answer made (a generator of its own).
				if rand.New(rand.NewPCG(uint64(seed), 0xbac)).IntN(2) == 0 {
					sc.Aimed = append(sc.Aimed, Look{N: 22, late: true, aim: aimBeforeBack, cancel: true})
				}
				// The records go dark before the key's attempts end
				// (about 2h50m into Bird's 3-hour window), so that the
				// search at the window's end fails.
				sc.Outage.From = 2*time.Hour + time.Duration(d.IntN(45))*time.Minute
				sc.SendsDark = &Window{To: sc.Outage.From + time.Duration(d.IntN(90))*time.Minute}
				// Operators who set a short decision deadline (4 to 12
				// hours, --decision-deadline), so that the searches
				// retried while the run waits are few. Three in four
				// have the records back within 3.5 hours, before the
				// deadline, so that a retried search runs as they
				// return; the others dark past the deadline, so that the
				// last search runs at it.
				sc.Policy.DecisionDeadline = 4*time.Hour + time.Duration(d.IntN(8*60))*time.Minute
				sc.Outage.To = sc.Outage.From + time.Duration(30+d.IntN(3*60))*time.Minute
				// (At Bird, whose records speak for a key, one in two: a
				// generator of its own keeps the other draws.)
				if d.IntN(4) == 0 || (prov == "bird" && rand.New(rand.NewPCG(uint64(seed), 0x1a58)).IntN(3) == 0) {
					sc.Outage.To = sc.Outage.From + sc.Policy.DecisionDeadline + time.Hour + time.Duration(d.IntN(2*60))*time.Minute
					// Half of those have the records back while the run's
					// last searches (a reconciliation's budget each) still
					// run after the deadline ended it: the last look finds
					// what the window's answers lost, and the run's
					// outcome changes after it ended Failed (a generator
					// of its own keeps the other draws).
					if e := rand.New(rand.NewPCG(uint64(seed), 0x1a57)); e.IntN(2) == 0 {
						sc.Outage.To = sc.Policy.SendBudget() + sc.Policy.DecisionDeadline + time.Duration(1+e.IntN(40))*time.Minute
					}
				}
				// (Not where Sendy forgets its answers early, which ends
				// the dark sends below: its draw, taken again here.)
				forgets := rand.New(rand.NewPCG(uint64(seed), 0x5e2d)).IntN(6) == 0
				if g := rand.New(rand.NewPCG(uint64(seed), 0x2e1a)); prov == "bird" && !forgets && sc.Outage.To < sc.Policy.SendBudget()+sc.Policy.DecisionDeadline && g.IntN(2) == 0 {
					// A second round at Bird (whose records can speak for
					// a key), for a resend carried out once the
					// records return: its sends dark too, and the records
					// dark again before its key's attempts end. A person
					// resends while the first wait's search fails (the
					// resend waits for a search, then is carried out), and
					// again while the second wait's search fails: that
					// resend waits until its own wait's deadline, not the
					// first's. The records come back after the first
					// wait's deadline and before the second's, so a resend
					// that kept the first's would be given up (a generator
					// of its own keeps the other draws).
					sc.Outage.To = max(sc.Outage.To, sc.Policy.SendBudget()+time.Duration(20+g.IntN(60))*time.Minute)
					back := sc.Outage.To
					reads := back + sc.Policy.SendBudget() - time.Duration(10+g.IntN(40))*time.Minute
					sc.Relapse = &Relapse{
						Sends: Window{From: back - 10*time.Minute, To: reads + time.Hour},
						Reads: Window{From: reads, To: max(reads+time.Duration(30+g.IntN(60))*time.Minute,
							sc.Policy.SendBudget()+sc.Policy.DecisionDeadline+time.Duration(10+g.IntN(110))*time.Minute)},
					}
					// The first round's sends never reach the provider, so
					// the records, once back, hold no message and the
					// waiting resend is carried out; nothing else ends the
					// first round (a send held in the queue, a rotated
					// credential, a cancellation request).
					sc.SendsDark.To = max(sc.SendsDark.To, sc.Policy.SendBudget()+5*time.Minute)
					sc.QueueShare, sc.Rotation, sc.CancelRequest = 0, nil, 0
					sc.Aimed = []Look{
						{N: 20, late: true, aim: aimFirst, resend: true},
						{N: 21, late: true, aim: aimRelapse, resend: true},
					}
				}
			}
		}
	}
	if f := rand.New(rand.NewPCG(uint64(seed), 0x5e2d)); f.IntN(6) == 0 {
		sc.SendyRetention = time.Duration(1+f.IntN(40)) * time.Minute
		if f.IntN(2) == 0 {
			// Aimed at it: answers that leave the outcome unknown among
			// answers that say nothing was done, so attempts under one
			// key go on past the retention.
			sc.SendFaultRate = 0.9
			sc.Kinds = []simulator.Kind{simulator.Committed5xx, simulator.DropAfterCommit, simulator.Error5xx, simulator.RateLimit, simulator.RateLimit}
		}
		// Not with answers lost for a while only: a Sendy that breaks
		// the retention the workers assume makes a message per attempt
		// past it, and a replay that answers once the network is back
		// reads, by the retention the workers assume, as the one message
		// (seeds 4636 and 5488 made 6 and 16): no run can see or count
		// them. The records still go dark as drawn.
		sc.SendsDark = nil
		// At Sendy, one in two with every answer lost until the key's
		// attempts have ended: the key's uncertain attempts are all a run
		// can count, and several of them at a provider that cannot be
		// searched by key are a possible duplicate, here a real one (a
		// generator of its own keeps the other draws).
		// The others with a reset where a new message answers an
		// attempt after one without a certain answer (which, past
		// the retention, may have made one too): the run a reset
		// starts gets a replay, and learns of the possible duplicate
		// from the ledger alone.
		if prov == simulator.Sendy && rand.New(rand.NewPCG(uint64(seed), 0xf06e7)).IntN(2) == 0 {
			sc.SendsDark = &Window{To: sc.Policy.SendBudget() + 5*time.Minute}
			sc.QueueShare = 0
		} else if prov == simulator.Sendy {
			sc.FreshCut = &Cut{Reset: true, AfterEffect: true}
			// Half of them with the key's first answer lost and nothing
			// heard from the provider until its retention has passed:
			// the first answer is a new message, the key's second.
			if u := rand.New(rand.NewPCG(uint64(seed), 0x04ea7d)); u.IntN(2) == 0 {
				sc.SendFaultRate, sc.Rotation = 0, nil
				// A replay can tell a message made after an attempt's
				// late effects and the clocks' slack (plus the first
				// attempt's own start) from that attempt's own.
				tell := sc.Policy.LateEffectHorizon + activities.ProviderClockSlack + 2*time.Minute
				if u.IntN(2) == 0 {
					// A retention past that: the worker dies before it
					// writes the new message's answer, so only the new
					// run's replay can tell the ledger.
					sc.SendyRetention = max(sc.SendyRetention, tell)
					sc.FreshCut.MidSend = true
				} else {
					// One shorter: no replay can tell, so the ledger
					// knows of the second message only from the Send
					// that got it, which the reset cuts after its effect.
					sc.SendyRetention = time.Duration(1+u.IntN(int(tell/time.Minute)-1)) * time.Minute
				}
				sc.Unheard = &Window{To: sc.SendyRetention + time.Duration(1+u.IntN(3))*time.Minute}
			}
		}
	}
	// Where a person cancels as the records return, half of them with
	// the records dark again at once, past a reconciliation's budget (a
	// generator of its own keeps the other draws).
	if g := rand.New(rand.NewPCG(uint64(seed), 0xda4a)); sc.Outage != nil && sc.Relapse == nil &&
		slices.ContainsFunc(sc.Aimed, func(l Look) bool { return l.cancel }) && g.IntN(2) == 0 {
		sc.DarkAgain = sc.Policy.ReconcileBudget + time.Duration(10+g.IntN(120))*time.Minute
	}
	// One in four reset after a move (a generator of its own keeps the
	// other draws).
	if m := rand.New(rand.NewPCG(uint64(seed), 0x30ec)); m.IntN(4) == 0 {
		sc.MoveCut = &Cut{Reset: true, Back: m.IntN(3)}
	}
	// Aimed at a failover after a last attempt that lands late (a
	// generator of its own keeps the other draws; not where another
	// aimed world already rules the sends or the records).
	if l := rand.New(rand.NewPCG(uint64(seed), 0x1a7d1)); prov == simulator.Bird && sc.Input.Fallback != "" &&
		sc.SendsDark == nil && sc.Aimed == nil && sc.SendyRetention == 0 && l.IntN(4) == 0 {
		p := sc.Policy
		sc.Landing = &Landing{
			// The last attempt starts LastAttemptLead before the budget
			// ends, counted from the run's first Send; a retry between
			// At and it (rare: minutes apart by then) hangs instead.
			At: p.SendBudget() - p.LastAttemptLead() - 20*time.Second,
			// Past the client's timeout, within the lock's life.
			Delay: p.AttemptTimeout + time.Duration(1+l.IntN(int((activities.ProviderLockLifetime-p.AttemptTimeout)/time.Second)))*time.Second,
		}
		// The records answer, so that the search after the window
		// can prove nothing was sent, and nothing else ends the sends.
		sc.ReadFaultRate, sc.Outage, sc.Rotation, sc.QueueShare, sc.CancelRequest = 0, nil, nil, 0, 0
	}
	// Aimed at the window's own guard: Temporal's clock steps back by
	// more than the window's margin while every send's answer is lost
	// (a generator of its own keeps the other draws; only where no
	// other aimed world rules the run, and with nothing else to end the
	// sends, so that the runs try the key until their own bound ends).
	if c := rand.New(rand.NewPCG(uint64(seed), 0xc10c5)); prov == simulator.Bird && sc.Landing == nil &&
		sc.SendsDark == nil && sc.Aimed == nil && sc.SendyRetention == 0 && c.IntN(10) == 0 {
		p := sc.Policy
		sc.ClockStep = &ClockStep{At: p.SendBudget() - time.Duration(10+c.IntN(60))*time.Minute, By: p.WindowMargin + time.Duration(1+c.IntN(20))*time.Minute}
		sc.SendsDark = &Window{To: p.SendBudget() + 5*time.Minute}
		sc.ReadFaultRate, sc.Outage, sc.Rotation, sc.QueueShare, sc.CancelRequest = 0, nil, nil, 0, 0
		// (Nor a reset: a run resumes on Temporal's clock.)
		sc.Looks, sc.Cuts, sc.ResetClosed, sc.MoveCut, sc.StartAgain = nil, nil, nil, nil, false
	}
	return sc
}

// lost reports whether the provider lost its record of message id for a
// lookup (LoseShare): decided by the id and the seed alone, so every
// lookup of the id gets the same answer and no other draw moves.
func (sc *Scenario) lost(id string) bool {
	if sc.LoseShare == 0 {
		return false
	}
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "%d/%s", sc.Seed, id)
	return float64(h.Sum64()%1000) < sc.LoseShare*1000
}

// rotated reports whether the credential is rotated away at t.
func (sc *Scenario) rotated(t time.Time) bool { return sc.Rotation.has(t.Sub(sc.Start)) }

// readFaultAt is the share of lookups and searches without an answer at t.
func (sc *Scenario) readFaultAt(t time.Time) float64 {
	if sc.Outage.has(t.Sub(sc.Start)) || sc.Relapse.readsDark(t.Sub(sc.Start)) {
		return 1
	}
	return sc.ReadFaultRate
}

// sendFault draws the fault a send request meets, if any, and its delay.
func (sc *Scenario) sendFault(r *rand.Rand, prov string) (simulator.Kind, time.Duration) {
	if r.Float64() >= sc.SendFaultRate {
		return "", 0
	}
	k := sc.Kinds[r.IntN(len(sc.Kinds))]
	if prov == simulator.Sendy {
		switch k {
		case simulator.LockExpiry, simulator.InProgress:
			k = simulator.Hang // Bird's lock has no Sendy twin
		case simulator.Unstored:
			k = simulator.Committed5xx
		}
	} else {
		switch k {
		case simulator.Undeliver:
			k = simulator.FailDelivery
		case simulator.Committed5xx:
			k = simulator.Unstored // Bird stores no 5xx answer
		}
	}
	switch k {
	case simulator.Hang, simulator.LockExpiry:
		// A hung request takes effect within the in-flight lock's life,
		// as the contract promises (docs/providers.md).
		return k, time.Duration(1+r.IntN(int(activities.ProviderLockLifetime/time.Second))) * time.Second
	case simulator.RateLimit:
		return k, time.Duration(1+r.IntN(60)) * time.Second
	}
	return k, 0
}

// String is the scenario in a few lines, for a timeline's head.
func (sc *Scenario) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: event %s at %s", sc.Seed, sc.Input.Key, sc.Input.Provider)
	if sc.Input.Fallback != "" {
		fmt.Fprintf(&b, " (fallback %s)", sc.Input.Fallback)
	}
	fmt.Fprintf(&b, ", %d-char text\n", len([]rune(sc.Input.Text)))
	fmt.Fprintf(&b, "  send faults %.0f%% of %v; lookups fail %.0f%%", sc.SendFaultRate*100, sc.Kinds, sc.ReadFaultRate*100)
	if sc.Outage != nil {
		fmt.Fprintf(&b, ", outage %s-%s", sc.Outage.From, sc.Outage.To)
	}
	if sc.SendsDark != nil {
		fmt.Fprintf(&b, ", every send's outcome unknown %s-%s, decision deadline %s", sc.SendsDark.From, sc.SendsDark.To, sc.Policy.DecisionDeadline)
	}
	if r := sc.Relapse; r != nil {
		fmt.Fprintf(&b, ", dark again: sends %s-%s, records %s-%s", r.Sends.From, r.Sends.To, r.Reads.From, r.Reads.To)
	}
	if sc.Rotation != nil {
		fmt.Fprintf(&b, ", credential rotated %s-%s", sc.Rotation.From, sc.Rotation.To)
	}
	if sc.QueueShare > 0 {
		fmt.Fprintf(&b, "; %.0f%% of sends wait in the task queue until their budget ends", sc.QueueShare*100)
	}
	if sc.Slow {
		b.WriteString("; activities take time")
	}
	if sc.StallShare > 0 {
		fmt.Fprintf(&b, "; %.0f%% of new messages stall 20-30h before their final status", sc.StallShare*100)
	}
	if sc.LoseShare > 0 {
		fmt.Fprintf(&b, "; the provider answers 404 to a lookup of %.0f%% of the message ids it gave", sc.LoseShare*100)
	}
	if sc.SendyRetention > 0 {
		fmt.Fprintf(&b, "; Sendy keeps answers for replay %s, not the window the workers assume", sc.SendyRetention)
	}
	fmt.Fprintf(&b, "\n  delivery: %.0f%% failed, %.0f%% undelivered, after %s\n", sc.FailRate*100, sc.UndeliveredRate*100, sc.DeliveryDelay)
	for _, l := range sc.Looks {
		fmt.Fprintf(&b, "  look %d at T+%s", l.N, l.At)
		if l.Eager {
			b.WriteString(" (decides whatever the state)")
		}
		b.WriteString("\n")
	}
	if len(sc.Aimed) > 0 {
		fmt.Fprintf(&b, "  %d look(s) aimed at searches that run while the run awaits a decision\n", len(sc.Aimed))
	}
	if sc.CancelRequest > 0 {
		fmt.Fprintf(&b, "  Temporal cancellation request at T+%s\n", sc.CancelRequest)
	}
	for _, c := range sc.Cuts {
		what := "worker restart (history replayed)"
		if c.Reset {
			what = fmt.Sprintf("reset to %d activities back", c.Back)
		}
		when := fmt.Sprintf("activity call %d", c.Call)
		if c.Call == 0 {
			when = fmt.Sprintf("T+%s", c.At)
		}
		after := "before"
		if c.AfterEffect {
			after = "after"
		}
		fmt.Fprintf(&b, "  %s at %s (%s its effect", what, when, after)
		if c.MidSend {
			b.WriteString("; a Send's answer goes unrecorded")
		}
		if c.FleetDown {
			b.WriteString("; no worker takes its retries")
		}
		if c.Zombie {
			fmt.Fprintf(&b, "; the activity still acts %s later for the replaced run", c.Lag)
		}
		b.WriteString(")\n")
	}
	if c := sc.ResetClosed; c != nil {
		fmt.Fprintf(&b, "  reset to %d activities back %s after the run closes\n", c.Back, c.At)
	}
	if c := sc.MoveCut; c != nil {
		fmt.Fprintf(&b, "  reset %d activities back at the first status lookup after a move\n", c.Back)
	}
	if sc.DarkAgain > 0 {
		fmt.Fprintf(&b, "  the records dark again for %s after the first search that answers once the outage ends\n", sc.DarkAgain)
	}
	if c := sc.ClockStep; c != nil {
		fmt.Fprintf(&b, "  from %s on, Temporal's clock is %s behind the ledger's and the providers'\n", c.At, c.By)
	}
	if l := sc.Landing; l != nil {
		fmt.Fprintf(&b, "  every send of the key lost on the way until %s, the next one hung %s\n", l.At, l.Delay)
	}
	if sc.Unheard != nil {
		fmt.Fprintf(&b, "  the key's first send answer lost and no later request heard %s-%s\n", sc.Unheard.From, sc.Unheard.To)
	}
	if sc.FreshCut != nil {
		b.WriteString("  reset after the effect of the first Send answered with a new message after an uncertain attempt\n")
	}
	if sc.StartAgain {
		b.WriteString("  started again after the run closes\n")
	}
	return b.String()
}
