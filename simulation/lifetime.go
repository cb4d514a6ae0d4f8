package simulation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/workflows"
)

// Lifetime is what one seed's lifetime did and what the checks found.
type Lifetime struct {
	Scenario *Scenario
	// Result is the run's result; Open is true when the run was still
	// open at the horizon, in OpenState.
	Result    contract.Result
	Open      bool
	OpenState contract.State
	// Violations are the promises the lifetime broke, one line each.
	Violations []string
	Timeline   *timeline
	// notes is the run's own timeline, as its query answered at the end.
	notes []contract.Entry
	// provider is the provider the run's query named at the end; search
	// is what its search attributes held then (the last upsert).
	provider string
	search   searchAttributes
	// Runs counts the workflow executions (segments) it took.
	Runs int
	// ended is when the run ended (zero while open).
	ended time.Time
}

// Failed reports whether a promise was broken.
func (l *Lifetime) Failed() bool { return len(l.Violations) > 0 }

// Report is the scenario, the violations and the timeline, for a person.
func (l *Lifetime) Report() string {
	s := l.Scenario.String()
	if len(l.Violations) == 0 {
		s += "promises kept\n"
	}
	for _, v := range l.Violations {
		s += "VIOLATION: " + v + "\n"
	}
	return s + "timeline:\n" + l.Timeline.String()
}

// call is one activity attempt as the world answered it.
type call struct {
	name    string
	attempt int32
	in      []byte
	out     any
	err     error
	at      time.Time
	// took is how long the call took on the world's clock before it
	// acted (zero unless the scenario is Slow); a replay takes it again.
	took time.Duration
}

// sent is a decision the person sent (for a reset or restart to deliver
// again to the run that replaces the cut one).
type sent struct {
	at     time.Duration
	d      contract.Decision
	update bool
	double bool
}

// ack is a decision the run acknowledged (an update that completed).
type ack struct {
	at time.Duration
	d  contract.Decision
	// deadline is the decision deadline the person saw as they decided.
	deadline time.Time
}

type lifetime struct {
	w  *world
	sc *Scenario
	tl *timeline

	fresh int // activity calls the world has seen
	cuts  []Cut
	sent  []sent
	// viol collects violations found while running.
	viol []string
	// reconciled are the times a Reconcile activity succeeded.
	reconciled []time.Time
	// failedSeen is when a lookup first saw a message of the event failed;
	// deliveredSeen when one first saw one delivered.
	failedSeen, deliveredSeen time.Time
	// searches are the times a Reconcile call searched, whatever it
	// found (reconciled keeps those that succeeded).
	searches []time.Time
	// lastSearch is the latest Reconcile call of a run's own, and
	// endedRun the run that ended last: whether the run's last search
	// read the provider's records, and the messages it found there.
	lastSearch struct {
		runID string
		ok    bool
		found []string
	}
	endedRun string
	// cancelIn is the run the Temporal cancellation request reached.
	cancelIn string
	// queue decides which Send activities wait in the task queue; queued
	// is true while the current one does.
	queue  *rand.Rand
	queued bool
	// took draws how long each new activity call takes, in a Slow
	// scenario.
	took *rand.Rand
	// aimed are the aimed looks not yet taken (Scenario.Aimed); one is
	// armed at a time.
	aimed      []Look
	aimedArmed bool
	// zombies are activities a reset left running for the run it
	// replaced (Cut.Zombie), in the order they were cut.
	zombies []*zombie
	// resetClosed is true once Scenario.ResetClosed was done; resets
	// counts the runs a reset replaced.
	resetClosed bool
	resets      int
	// freshCut is set once Scenario.FreshCut has cut a run.
	freshCut bool
	// darkAgain is set once Scenario.DarkAgain took the records dark.
	darkAgain bool
	// planned is set once a run planned a move; moveCut once
	// Scenario.MoveCut has cut a run.
	planned, moveCut bool
	// record is the ledger's record of the event as last read after an
	// activity call (watchLedger), to check it never goes back, and
	// recordWrites the writes of it counted then.
	record       *ledger.Event
	recordWrites int
}

// Run plays the lifetime of one seed and checks the promises.
func Run(seed int64) (*Lifetime, error) {
	sc := NewScenario(seed)
	tl := &timeline{sc: sc}
	w, err := newWorld(context.Background(), sc, tl)
	if err != nil {
		return nil, err
	}
	defer w.close()
	lt := &lifetime{w: w, sc: sc, tl: tl, cuts: append([]Cut(nil), sc.Cuts...), aimed: append([]Look(nil), sc.Aimed...),
		queue: rand.New(rand.NewPCG(uint64(seed), 0x9e7e1)), took: rand.New(rand.NewPCG(uint64(seed), 0x7007))}
	out := &Lifetime{Scenario: sc, Timeline: tl}

	runID := "run-1"
	var replay []call
	var resumes []resume
	var resetFrom time.Time
	var acks []ack
	for {
		out.Runs++
		seg := lt.segment(runID, replay, resumes)
		seg.resetFrom = resetFrom
		seg.execute()
		if seg.cutBy == nil {
			out.Result, out.Open, out.OpenState, acks, out.notes = seg.result, seg.open, seg.openState, seg.acks, seg.notes
			out.provider, out.search, out.ended = seg.provider, seg.search, seg.ended
			if seg.err != "" {
				lt.viol = append(lt.viol, seg.err)
			}
			if seg.open || seg.err != "" || sc.ResetClosed == nil || lt.resetClosed {
				break
			}
			// An operator resets the closed run, as the web UI's Reset
			// does for a completed workflow: a new run replays part of
			// its history and goes on from there.
			lt.resetClosed = true
			seg.cutBy = sc.ResetClosed
			tl.add(w.clock.Now().Add(sc.ResetClosed.At), "temporal", "an operator resets the closed run %s, %s after it ended", runID, sc.ResetClosed.At)
		}
		c := seg.cutBy
		now := w.clock.Now()
		if c == sc.ResetClosed {
			now = now.Add(c.At)
		}
		replay = seg.calls
		resetFrom = time.Time{}
		if c.Reset {
			lt.resets++
			replay = lt.resetPoint(seg.calls, c.Back)
			resetFrom = sc.Start
			if len(replay) > 0 {
				resetFrom = replay[len(replay)-1].at
			}
			if lt.cancelIn != "" && sc.Start.Add(sc.CancelRequest).After(resetFrom) {
				lt.cancelIn = "" // after the reset point: the new run never got it
			}
			runID = fmt.Sprintf("run-%d", out.Runs+1)
			tl.add(now, "temporal", "reset: run %s replays %d of %d activity calls and goes on", runID, len(replay), len(seg.calls))
		} else {
			tl.add(now, "temporal", "worker restart: %s replays its %d activity calls and goes on", runID, len(replay))
		}
		// The new segment waits where the ones it replays waited, and,
		// once its history is replayed, until now.
		var kept []resume
		for _, r := range seg.resumes {
			if r.call < len(replay) {
				kept = append(kept, r)
			}
		}
		resumes = append(kept, resume{call: len(replay), at: now})
		if out.Runs > 20 {
			lt.viol = append(lt.viol, "more than 20 cuts: the simulation's cut schedule did not end")
			break
		}
	}
	lt.runLateZombies()
	lt.w.tr.mu.Lock()
	lt.w.tr.wake(time.Time{}, true)
	lt.w.tr.mu.Unlock()
	if sc.StartAgain && !out.Open {
		before := len(w.sim.Messages(simulator.Filter{}))
		seg := lt.segment(fmt.Sprintf("run-%d", out.Runs+1), nil, nil)
		seg.again, seg.start = true, w.clock.Now()
		seg.execute()
		out.Runs++
		after := len(w.sim.Messages(simulator.Filter{}))
		tl.add(w.clock.Now(), "check", "the event started again after it closed: %s", seg.result.State)
		if after != before {
			lt.viol = append(lt.viol, fmt.Sprintf("a start of the closed event made %d more messages", after-before))
		}
		if seg.err != "" {
			lt.viol = append(lt.viol, "the event started again: "+seg.err)
		}
	}
	lt.viol = append(lt.viol, lt.check(out, acks)...)
	out.Violations = lt.viol
	return out, nil
}

// resetPoint is the history a reset keeps: the calls up to the start of
// an activity (a workflow task follows each activity's end), back
// activities before the cut.
func (lt *lifetime) resetPoint(calls []call, back int) []call {
	var starts []int
	for i, c := range calls {
		if c.attempt <= 1 {
			starts = append(starts, i)
		}
	}
	if len(starts) == 0 {
		return nil
	}
	i := len(starts) - 1 - back
	if i < 0 {
		i = 0
	}
	return calls[:starts[i]]
}

// segment is one execution of the workflow in a test environment: a run,
// or the same run after a worker restart, or a new run after a reset.
type segment struct {
	lt    *lifetime
	runID string
	env   *testsuite.TestWorkflowEnvironment
	start time.Time

	mu     sync.Mutex
	replay []call
	calls  []call
	// took is how long the call about to act took (duration).
	took    time.Duration
	resumes []resume
	resumed int
	// resetFrom is, for a run a reset made, the moment of the last
	// activity call it replays: its history ends there.
	resetFrom time.Time
	cut       bool
	cutBy     *Cut
	again     bool

	result    contract.Result
	notes     []contract.Entry
	open      bool
	openState contract.State
	ended     time.Time
	acks      []ack
	err       string
	provider  string
	search    searchAttributes
}

// searchAttributes are the run's SmsState and SmsProvider as its last
// upsert left them ("" before any).
type searchAttributes struct{ state, provider string }

// resume is a point where a run that replaces a cut one waits: before
// its call-th activity call, until the moment at which the cut happened.
type resume struct {
	call int
	at   time.Time
}

func (lt *lifetime) segment(runID string, replay []call, resumes []resume) *segment {
	return &segment{lt: lt, runID: runID, replay: replay, resumes: resumes, start: lt.sc.Start}
}

// cutTime is when the segment's run was last cut, from the start; -1 for
// a first run.
func (s *segment) cutTime() time.Duration {
	if len(s.resumes) == 0 {
		return -1
	}
	return s.resumes[len(s.resumes)-1].at.Sub(s.lt.sc.Start)
}

// errCut ends the workflow code of a cut segment.
type errCut struct{}

func (s *segment) checkCut() {
	s.mu.Lock()
	cut := s.cut
	s.mu.Unlock()
	if cut {
		panic(errCut{})
	}
}

func (s *segment) execute() {
	lt, sc := s.lt, s.lt.sc
	var ts testsuite.WorkflowTestSuite
	ts.SetLogger(logging.SDK(zap.NewNop()))
	env := ts.NewTestWorkflowEnvironment()
	s.env = env
	env.SetStartTime(s.start)
	env.SetTestTimeout(time.Minute)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: sc.Input.Key, TaskQueue: "sms"})
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&workerInterceptor{seg: s}}})
	env.RegisterWorkflowWithOptions(workflows.SendSMS, workflow.RegisterOptions{Name: contract.WorkflowName})
	s.register(env)
	lt.w.clock.set(env.Now)
	defer lt.w.clock.set(func() time.Time { return env.Now() })
	lt.aimedArmed = false // a look armed in the segment before went with it

	cutTime := s.cutTime()
	if !s.again {
		// Decisions sent before a cut reach the run that replaces it, at
		// the moments they were sent (Temporal reapplies them).
		for _, d := range lt.sent {
			if d.at <= cutTime {
				env.RegisterDelayedCallback(func() { s.deliver(d) }, max(d.at, time.Nanosecond))
			}
		}
		for _, l := range sc.Looks {
			if l.At > cutTime {
				env.RegisterDelayedCallback(func() { s.look(l) }, l.At)
			}
		}
		if s.cancelDue(cutTime) {
			env.RegisterDelayedCallback(func() {
				lt.tl.add(env.Now(), "person", "a Temporal cancellation request")
				lt.cancelIn = s.runID
				env.CancelWorkflow()
			}, sc.CancelRequest)
		}
		for _, z := range lt.zombies {
			if !z.done {
				env.RegisterDelayedCallback(func() { lt.runZombie(z) }, z.at.Sub(sc.Start))
			}
		}
		for _, c := range lt.cuts {
			if c.Call == 0 && c.At > cutTime {
				env.RegisterDelayedCallback(func() { s.cutAtTime(c.At) }, c.At)
			}
		}
	}
	env.RegisterDelayedCallback(func() { s.horizon() }, sc.Horizon)

	func() {
		defer func() {
			if r := recover(); r != nil {
				s.err = fmt.Sprintf("the test environment stopped: %v", r)
			}
		}()
		env.ExecuteWorkflow(contract.WorkflowName, sc.Input)
	}()
	if s.cutBy != nil {
		return
	}
	if st, ok := s.query(); ok {
		s.notes, s.provider = st.Timeline, st.Provider
	}
	if !env.IsWorkflowCompleted() {
		s.err = fmt.Sprintf("the workflow did not complete (%v)", env.GetWorkflowError())
		return
	}
	err := env.GetWorkflowError()
	if err == nil {
		_ = env.GetWorkflowResult(&s.result)
	} else if res, ok := contract.ResultFromError(err); ok {
		s.result = res
	} else if !s.open {
		s.err = fmt.Sprintf("the run ended without a result: %v", err)
	}
	if !s.open {
		s.ended = env.Now()
		if !s.again {
			lt.endedRun = s.runID // the event's run, not a second start's
		}
		lt.tl.add(env.Now(), "run", "%s ended %s: %s", s.runID, s.result.State, s.result.Reason)
	}
}

// cancelDue reports whether the Temporal cancellation request reaches
// this segment's run: when it is still to come, or when the run's
// history holds it (the same run replayed after a restart, or a reset
// to a point after it; a reset to a point before it drops it, as
// Temporal does).
func (s *segment) cancelDue(cutTime time.Duration) bool {
	sc := s.lt.sc
	switch {
	case sc.CancelRequest <= 0:
		return false
	case sc.CancelRequest > cutTime:
		return true
	case s.lt.cancelIn == "":
		return false
	case s.lt.cancelIn == s.runID:
		return true
	}
	return !sc.Start.Add(sc.CancelRequest).After(s.resetFrom)
}

// horizon ends the world: a run still open is recorded as such and asked
// to cancel, so the environment ends.
func (s *segment) horizon() {
	st, ok := s.query()
	if !ok || st.State.Final() {
		return
	}
	s.open, s.openState, s.result = true, st.State, st.Result
	s.lt.tl.add(s.env.Now(), "check", "horizon: the run is still %s", st.State)
	s.env.CancelWorkflow()
}

func (s *segment) query() (st contract.Status, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			ok = false // the environment stopped before the run began
		}
	}()
	v, err := s.env.QueryWorkflow(contract.QueryState)
	if err != nil {
		return contract.Status{}, false
	}
	return st, v.Get(&st) == nil
}

// look is a person looking at the run: when it awaits a decision (or
// when eager) they decide, through the UI's update or a signal, and
// sometimes click twice.
func (s *segment) look(l Look) {
	st, ok := s.query()
	if !ok || st.State.Final() {
		return
	}
	if st.State != contract.AwaitingDecision && !l.Eager {
		return
	}
	s.toldOfDuplicates(st)
	// Aimed at the deadline's edge: one person in four puts the
	// decision off until the last minutes before the run's decision
	// deadline, when a retried search may be running. The decision is
	// the one they would have made now (its own generator).
	if p := rand.New(rand.NewPCG(uint64(s.lt.sc.Seed), uint64(0x400+l.N))); st.State == contract.AwaitingDecision && !l.late && !st.DecisionDeadline.IsZero() && p.IntN(4) == 0 {
		later := l
		later.late, later.Eager = true, false
		wait := st.DecisionDeadline.Sub(s.env.Now()) - time.Duration(p.Int64N(int64(40*time.Minute)))
		if edge := rand.New(rand.NewPCG(uint64(s.lt.sc.Seed), uint64(0x600+l.N))); edge.IntN(2) == 0 {
			// At the deadline's very edge: from 20 s before it to 100 s
			// after, while the run's last retried search may still run
			// (a run that waits for none has ended by then).
			wait = st.DecisionDeadline.Sub(s.env.Now()) + time.Duration(edge.Int64N(int64(120*time.Second))) - 20*time.Second
		}
		if wait > 0 {
			s.lt.tl.add(s.env.Now(), "person", "look %d: the decision is put off until %s from the deadline", l.N, s.env.Now().Add(wait).Sub(st.DecisionDeadline).Round(time.Second))
			s.env.RegisterDelayedCallback(func() { s.look(later) }, wait)
			return
		}
	}
	r := rand.New(rand.NewPCG(uint64(s.lt.sc.Seed), uint64(0x100+l.N)))
	d := contract.Decision{By: fmt.Sprintf("person-%d", l.N), Reason: fmt.Sprintf("look %d", l.N), Key: s.lt.sc.Input.Key, ID: fmt.Sprintf("look-%d", l.N)}
	x := r.Float64()
	switch {
	case x < 0.45:
		d.Action = contract.ActionResend
	case x < 0.6:
		d.Action, d.Force = contract.ActionResend, true
	case x < 0.75:
		d.Action = contract.ActionResend
		d.Provider = s.lt.sc.Input.Fallback
		if d.Provider == "" {
			d.Provider = string(provider.Sendy)
			if s.lt.sc.Input.Provider == "sendy" {
				d.Provider = string(provider.Bird)
			}
		}
	default:
		d.Action = contract.ActionCancel
	}
	if l.cancel {
		d.Action, d.Force, d.Provider = contract.ActionCancel, false, ""
	}
	if l.resend {
		d.Action, d.Force, d.Provider = contract.ActionResend, false, ""
	}
	snd := sent{at: s.env.Now().Sub(s.lt.sc.Start), d: d, update: r.IntN(3) > 0 || l.resend, double: r.IntN(4) == 0}
	// The copies come first: they meet the run awaiting a decision, as
	// a copy sent while a person looks would, not one that already took
	// the person's. lt.sent keeps the order of delivery, which a run
	// that replaces a cut one gets again.
	s.copies(l, snd)
	s.lt.sent = append(s.lt.sent, snd)
	s.deliver(snd)
	s.colleague(l)
}

// toldOfDuplicates checks what a person who looks at a run awaiting a
// decision is told against the world: where the providers hold two live
// messages of the event and a search of the run succeeded after both
// were made, the run says a duplicate is possible (or proven), so that
// nobody decides on a resend believing at most one SMS went out. The run
// need not know the messages: at a provider that cannot be searched by
// key, several attempts without a certain answer are what such a search
// can count. (While every search fails, the run says only that its
// outcome is unknown; what it can count then is said at its close.)
func (s *segment) toldOfDuplicates(st contract.Status) {
	if st.State != contract.AwaitingDecision || st.DuplicateSend || st.PossibleDuplicate {
		return
	}
	var live []simulator.Message
	var latest time.Time
	for _, m := range s.lt.w.sim.Messages(simulator.Filter{}) {
		if ofEvent(s.lt.sc.Input.Key, m) && alive(m) {
			live = append(live, m)
			if m.CreatedAt.After(latest) {
				latest = m.CreatedAt
			}
		}
	}
	// A search whose answer this run received (its own, or one its
	// history kept from the run a reset replaced), not one a cut lost.
	s.mu.Lock()
	searched := slices.ContainsFunc(s.calls, func(c call) bool { return c.name == "Reconcile" && c.err == nil && !c.at.Before(latest) })
	s.mu.Unlock()
	if len(live) > 1 && searched {
		s.lt.viol = append(s.lt.viol, fmt.Sprintf("at T+%s a person is shown the run awaiting a decision with neither duplicateSend nor possibleDuplicate, while the providers hold %d live messages of the event (%s)",
			s.env.Now().Sub(s.lt.sc.Start).Round(time.Second), len(live), ids(live)))
	}
}

// colleague is someone who decides too, a moment after the person:
// their decision meets the run while it applies the person's (it reads
// the ledger, searches, sends), which it must refuse, never take later
// in a state its author did not see.
func (s *segment) colleague(l Look) {
	r := rand.New(rand.NewPCG(uint64(s.lt.sc.Seed), uint64(0x500+l.N)))
	if r.IntN(3) != 0 {
		return
	}
	d := contract.Decision{By: fmt.Sprintf("colleague-%d", l.N), Reason: fmt.Sprintf("after look %d", l.N), Key: s.lt.sc.Input.Key, ID: fmt.Sprintf("colleague-%d", l.N), Action: contract.ActionCancel}
	if r.IntN(2) == 0 {
		d.Action = contract.ActionResend
	}
	update := r.IntN(4) > 0
	// Most often within a second or two, while the run still reads the
	// ledger or searches; else within the minute.
	after := time.Duration(100+r.IntN(2_000)) * time.Millisecond
	if r.IntN(2) == 0 {
		after = time.Duration(100+r.IntN(60_000)) * time.Millisecond
	}
	s.env.RegisterDelayedCallback(func() {
		snd := sent{at: s.env.Now().Sub(s.lt.sc.Start), d: d, update: update}
		s.lt.sent = append(s.lt.sent, snd)
		s.deliver(snd)
	}, after)
}

// copies is someone who reaches Temporal without the keys: they send a
// decision copied from the run's history again, or one of another event,
// as a signal or an update. A run applies neither (check counts the decisions it applied by id). Its own random
// source leaves every other draw of the scenario as it was.
func (s *segment) copies(l Look, made sent) {
	r := rand.New(rand.NewPCG(uint64(s.lt.sc.Seed), uint64(0x200+l.N)))
	if len(s.lt.sent) > 0 && r.IntN(3) == 0 {
		c := s.lt.sent[r.IntN(len(s.lt.sent))]
		c.at, c.update, c.double = made.at, r.IntN(2) == 0, false
		s.lt.tl.add(s.env.Now(), "person", "a copy of decision %s", c.d.ID)
		s.lt.sent = append(s.lt.sent, c)
		s.deliver(c)
	}
	if r.IntN(6) == 0 {
		f := made
		f.d.Key, f.d.ID = s.lt.sc.Input.Key+"-other", fmt.Sprintf("%s%d", foreignDecision, l.N)
		f.at, f.update, f.double = made.at, r.IntN(2) == 0, false
		s.deliver(f)
	}
}

// foreignDecision starts the id of a decision made for another event.
const foreignDecision = "other-event-"

// deliver sends a decision to the run, once or as a double click.
func (s *segment) deliver(d sent) {
	n := 1
	if d.double {
		n = 2
	}
	for i := range n {
		what := describe(d.d)
		if !d.update {
			s.lt.tl.add(s.env.Now(), "person", "signal %s", what)
			s.env.SignalWorkflow(d.d.Action, d.d)
			continue
		}
		id := fmt.Sprintf("%s-%s-%d-%d", d.d.By, d.d.ID, d.at, i)
		// What the person saw as they clicked: a run that is not awaiting
		// a decision refuses one (docs/decisions.md).
		before, seen := s.query()
		// And what the run's last search said: where it could not speak
		// for the event, an unforced resend can only be refused, so the
		// update refuses it as it comes instead of acknowledging it.
		mute, muteAt := s.mute()
		s.env.UpdateWorkflow(contract.UpdateDecide, id, &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) {
				s.lt.tl.add(s.env.Now(), "person", "update %s refused: %v", what, err)
			},
			OnComplete: func(_ any, err error) {
				if err != nil {
					s.lt.tl.add(s.env.Now(), "person", "update %s failed: %v", what, err)
					return
				}
				s.lt.tl.add(s.env.Now(), "person", "update %s acknowledged", what)
				s.acks = append(s.acks, ack{at: s.env.Now().Sub(s.lt.sc.Start), d: d.d, deadline: before.DecisionDeadline})
				if mute && d.d.Action == contract.ActionResend && !d.d.Force {
					s.lt.viol = append(s.lt.viol, fmt.Sprintf("the unforced %s was acknowledged at %s though the run's last search (%s) could not speak for the event: a resend there would be blind, and the run can only refuse it later",
						what, at(s.lt.sc, s.env.Now()), at(s.lt.sc, muteAt)))
				}
				if seen && before.State != contract.AwaitingDecision {
					s.lt.viol = append(s.lt.viol, fmt.Sprintf("the %s was acknowledged at %s though the run was %s, not awaiting a decision, when it came",
						what, at(s.lt.sc, s.env.Now()), before.State))
				}
			},
		}, d.d)
	}
}

func describe(d contract.Decision) string {
	s := d.Action + " by " + d.By
	if d.Force {
		s += " (force)"
	}
	if d.Provider != "" {
		s += " at " + d.Provider
	}
	return s
}

// cutAtTime cuts the run while it waits (no activity running): a
// signal the run ignores wakes its workflow code, which then stops.
func (s *segment) cutAtTime(at time.Duration) {
	i := slices.IndexFunc(s.lt.cuts, func(c Cut) bool { return c.Call == 0 && c.At == at })
	if i < 0 {
		return
	}
	c := s.lt.cuts[i]
	s.lt.cuts = append(s.lt.cuts[:i:i], s.lt.cuts[i+1:]...)
	st, ok := s.query()
	if !ok || st.State.Final() {
		return
	}
	s.mu.Lock()
	s.cut, s.cutBy = true, &c
	s.mu.Unlock()
	s.lt.tl.add(s.env.Now(), "temporal", "cut while %s", st.State)
	s.env.SignalWorkflow("simulation-cut", nil)
}

// takeCut returns the cut scheduled at the world's n-th activity call.
func (lt *lifetime) takeCut(n int) *Cut {
	for i, c := range lt.cuts {
		if c.Call == n {
			lt.cuts = append(lt.cuts[:i:i], lt.cuts[i+1:]...)
			return &c
		}
	}
	return nil
}

// register registers the activities, each wrapped so that the world
// sees every call: a replaying segment gets the recorded answers, a
// cut stops the segment, and the timeline records what happened.
func (s *segment) register(env *testsuite.TestWorkflowEnvironment) {
	a := s.lt.w.acts
	// Each activity is registered, then mocked by its name with its
	// wrapped self: the mock waits on the test clock for the call's
	// duration before the activity acts, as a real activity's work takes
	// time while the run's signals, updates and timers go on.
	acts := []struct {
		name string
		fn   any
	}{
		{"Prepare", wrap(s, "Prepare", a.Prepare)},
		{"Recall", wrap(s, "Recall", a.Recall)},
		{"Plan", wrap(s, "Plan", a.Plan)},
		{"PlanMove", wrap(s, "PlanMove", a.PlanMove)},
		{"Send", wrap(s, "Send", a.Send)},
		{"Reconcile", wrap(s, "Reconcile", a.Reconcile)},
		{"Status", wrap(s, "Status", a.Status)},
		{"Settle", wrap(s, "Settle", a.Settle)},
	}
	for _, x := range acts { // every registration before the first mock
		env.RegisterActivityWithOptions(x.fn, activity.RegisterOptions{Name: x.name})
	}
	for _, x := range acts {
		env.OnActivity(x.name, mock.Anything, mock.Anything).Return(x.fn).AfterFn(func() time.Duration { return s.duration(x.name) })
	}
}

// duration is how long the activity call about to act takes: what it
// took when the call is replayed, else, in a Slow scenario, a seeded
// draw: most calls a moment, some seconds, a few most of their
// start-to-close timeout (the test environment times activities out on
// the real clock only, so no draw passes it).
func (s *segment) duration(name string) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := len(s.calls); i < len(s.replay) {
		s.took = s.replay[i].took
		return s.took
	}
	s.took = 0
	if !s.lt.sc.Slow {
		return 0
	}
	limit := timeoutOf(s.lt.sc, name)
	r := s.lt.took
	switch x := r.Float64(); {
	case x < 0.6:
		s.took = time.Duration(r.IntN(500)) * time.Millisecond
	case x < 0.9:
		s.took = time.Duration(500+r.IntN(4500)) * time.Millisecond
	default:
		s.took = time.Duration(r.Int64N(int64(limit)))
	}
	if name == "Reconcile" && s.took > 0 {
		s.aim(s.took / 2)
	}
	return s.took
}

// aim arms the aimed looks at a search that takes time: halfway
// through it the first look it suits is taken, and the person decides
// if the run awaits a decision; else the looks stay for a later search.
func (s *segment) aim(after time.Duration) {
	lt := s.lt
	if len(lt.aimed) == 0 || lt.aimedArmed {
		return
	}
	lt.aimedArmed = true
	s.env.RegisterDelayedCallback(func() {
		s.mu.Lock()
		lt.aimedArmed = false
		aimed := append([]Look(nil), lt.aimed...)
		s.mu.Unlock()
		st, ok := s.query()
		if !ok || st.State != contract.AwaitingDecision {
			return
		}
		// The first look whose search this is: one aimed at the records'
		// return or at the deadline waits for it, and lets the others by.
		now := s.env.Now()
		for i, l := range aimed {
			switch l.aim {
			case aimBack:
				if o := lt.sc.Outage; o == nil || now.Before(lt.sc.Start.Add(o.To)) {
					continue
				}
			case aimBeforeBack:
				if o := lt.sc.Outage; o == nil || now.Before(lt.sc.Start.Add(o.To-25*time.Minute)) || !now.Before(lt.sc.Start.Add(o.To)) {
					continue
				}
			case aimRelapse:
				if r := lt.sc.Relapse; r == nil || now.Before(lt.sc.Start.Add(r.Reads.From)) {
					continue
				}
			case aimDeadline:
				// In its last 5 minutes a search may still run when
				// the deadline passes; after it, a decision is refused.
				if st.DecisionDeadline.IsZero() || now.Before(st.DecisionDeadline.Add(-5*time.Minute)) {
					continue
				}
			}
			s.mu.Lock()
			lt.aimed = append(aimed[:i:i], aimed[i+1:]...)
			s.mu.Unlock()
			lt.tl.add(s.env.Now(), "person", "look %d, aimed at the search in flight (%s)", l.N, l.aim)
			s.look(l)
			return
		}
	}, after)
}

// timeoutOf is the longest an activity call of name takes here: within
// its start-to-close timeout (the test environment times activities out
// on the real clock only, so no draw may pass it).
func timeoutOf(sc *Scenario, name string) time.Duration {
	switch name {
	case "Send":
		return sc.Policy.AttemptTimeout
	case "Reconcile":
		return 100 * time.Second // of 2 minutes
	}
	return 25 * time.Second // Status, Settle and the ledger's steps have 30 s
}

// mute reports whether the run's last search, as its history so far
// holds it (replayed calls included), could not speak for the event: no
// list endpoint and no message id, or an id the provider no longer
// finds. A failed search after it leaves that standing; a new key
// planned (a resend or a move) ends it. at is when that search answered.
func (s *segment) mute() (on bool, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.calls) - 1; i >= 0; i-- {
		c := s.calls[i]
		if c.err != nil {
			continue
		}
		switch c.name {
		case "Plan", "PlanMove":
			return false, time.Time{}
		case "Reconcile":
			ro, ok := c.out.(activities.ReconcileOutput)
			return ok && ((!ro.Searched && !ro.NotSent) || len(ro.Vanished) > 0), c.at
		}
	}
	return false, time.Time{}
}

func wrap[I, O any](s *segment, name string, fn func(context.Context, I) (O, error)) func(context.Context, I) (O, error) {
	return func(ctx context.Context, in I) (O, error) {
		var zero O
		inJSON, _ := json.Marshal(in)
		info := activity.GetInfo(ctx)
		attempt := info.Attempt
		s.mu.Lock()
		if s.cut {
			s.mu.Unlock()
			return zero, cutError()
		}
		i := len(s.calls)
		if i < len(s.replay) {
			rec := s.replay[i]
			s.calls = append(s.calls, rec)
			s.mu.Unlock()
			if rec.name != name || string(rec.in) != string(inJSON) {
				s.lt.viol = append(s.lt.viol, fmt.Sprintf("nondeterminism: replaying %s, activity call %d was %s %s and is now %s %s", s.runID, i, rec.name, rec.in, name, inJSON))
			}
			if rec.err != nil {
				return zero, rec.err
			}
			return rec.out.(O), nil
		}
		s.lt.fresh++
		cut := s.lt.takeCut(s.lt.fresh)
		lt := s.lt
		if cut == nil && name == "Status" && lt.sc.MoveCut != nil && lt.planned && !lt.moveCut {
			lt.moveCut, cut = true, lt.sc.MoveCut
		}
		if name == "Send" && attempt <= 1 {
			lt.queued = lt.sc.QueueShare > 0 && lt.queue.Float64() < lt.sc.QueueShare
		}
		queued := name == "Send" && lt.queued && cut == nil
		s.mu.Unlock()
		now := lt.w.clock.Now()
		if queued {
			// The activity waits in the task queue: no worker starts it
			// before its schedule-to-close budget ends. Each retry the
			// environment makes stands for more of that wait.
			err := temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil)
			if attempt <= 1 {
				lt.tl.add(now, "temporal", "%s #%d waits in the task queue until its budget ends: no attempt begins", name, lt.fresh)
			}
			s.mu.Lock()
			s.calls = append(s.calls, call{name: name, attempt: attempt, in: inJSON, err: err, at: now, took: s.took})
			s.mu.Unlock()
			return zero, err
		}
		if cut != nil && !cut.AfterEffect {
			if cut.Reset && cut.Zombie {
				lt.zombies = append(lt.zombies, &zombie{name: name, runID: s.runID, attempt: attempt,
					at: now.Add(min(cut.Lag, timeoutOf(lt.sc, name))),
					act: func(ctx context.Context) (string, error) {
						out, err := fn(ctx, in)
						return summary(name, in, out, err), err
					}})
			}
			s.stop(cut, now, name)
			return zero, cutError()
		}
		if sc := lt.sc; cut == nil && name == "Send" && sc.FreshCut != nil && sc.FreshCut.MidSend && sc.Unheard != nil && !lt.freshCut && !now.Before(sc.Start.Add(sc.Unheard.To)) && !info.IsLocalActivity {
			// The first Send once the provider is heard again: its answer
			// is the key's second message, and the worker dies with it.
			lt.freshCut = true
			cut = sc.FreshCut
		}
		mid := cut != nil && cut.MidSend && name == "Send"
		if mid {
			lt.w.dying.died(true)
		}
		// The world answers at once: no deadline of the real clock (the
		// test environment's local activities get one from the test
		// clock, already past on the real one) may decide the answer.
		out, err := fn(context.WithoutCancel(ctx), in)
		lt.tl.add(now, "activity", "%s #%d (attempt %d) %s", name, lt.fresh, attempt, summary(name, in, out, err))
		if mid {
			lt.w.dying.died(false)
			lt.tl.add(now, "temporal", "the worker died after the provider's answer and before it was written: the attempt's ledger row stays open")
			if cut.FleetDown && !cut.Reset {
				lt.queued = true
				lt.tl.add(now, "temporal", "no worker takes the Send's retries before its budget ends")
			}
		}
		lt.observe(name, now, in, out, err)
		lt.watchLedger(now, name)
		if name == "PlanMove" && err == nil {
			s.mu.Lock()
			lt.planned = true
			s.mu.Unlock()
		}
		if so, ok := any(out).(activities.SendOutput); ok && err == nil && cut == nil && lt.sc.FreshCut != nil && !lt.sc.FreshCut.MidSend && !lt.freshCut &&
			so.Result.Outcome == provider.Accepted && so.Uncertain && !info.IsLocalActivity {
			lt.freshCut = true
			cut = lt.sc.FreshCut
		}
		if cut != nil && !cut.Reset && !info.IsLocalActivity {
			// The worker died after the activity did its work: the
			// result is lost, and the server retries the activity once its
			// start-to-close timeout passes (a new attempt, not a new
			// activity); the new worker replays the run from its history.
			// (A local activity's result is lost with the workflow task
			// that would have recorded it: the run is cut, and the replay
			// runs the step again.)
			lost := temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_START_TO_CLOSE, nil)
			lt.tl.add(now, "temporal", "the worker died after %s's effect: its result is lost and the activity is retried", name)
			s.mu.Lock()
			s.calls = append(s.calls, call{name: name, attempt: attempt, in: inJSON, err: lost, at: now, took: s.took})
			s.mu.Unlock()
			return zero, lost
		}
		if cut != nil {
			s.stop(cut, now, name)
			return zero, cutError()
		}
		s.mu.Lock()
		s.calls = append(s.calls, call{name: name, attempt: attempt, in: inJSON, out: out, err: err, at: now, took: s.took})
		s.mu.Unlock()
		if name == "Reconcile" && !s.again {
			// A search whose answer the run gets (not one a cut lost,
			// nor a second start's).
			ls := &lt.lastSearch
			ls.runID, ls.ok, ls.found = s.runID, err == nil, nil
			if ro, ok := any(out).(activities.ReconcileOutput); ok && err == nil {
				for _, m := range ro.Messages {
					ls.found = append(ls.found, m.ID)
				}
			}
		}
		return out, err
	}
}

func (s *segment) stop(c *Cut, now time.Time, name string) {
	s.mu.Lock()
	s.cut, s.cutBy = true, c
	s.mu.Unlock()
	when := "before"
	if c.AfterEffect {
		when = "after"
	}
	s.lt.tl.add(now, "temporal", "cut %s %s's effect", when, name)
}

func cutError() error {
	return temporal.NewNonRetryableApplicationError("the simulation cut this run", "SimulationCut", nil)
}

// observe keeps what the checks need from the activities' answers.
func (lt *lifetime) observe(name string, now time.Time, in, out any, err error) {
	switch name {
	case "Reconcile":
		lt.searches = append(lt.searches, now)
		if err != nil {
			return
		}
		lt.reconciled = append(lt.reconciled, now)
		if o := lt.sc.Outage; lt.sc.DarkAgain > 0 && !lt.darkAgain && o != nil && !now.Before(lt.sc.Start.Add(o.To)) {
			lt.darkAgain = true
			lt.w.tr.darkUntil(now.Add(lt.sc.DarkAgain))
			lt.tl.add(now, "provider", "the records go dark again until %s", at(lt.sc, now.Add(lt.sc.DarkAgain)))
		}
		if ro, ok := out.(activities.ReconcileOutput); ok {
			for _, m := range ro.Messages {
				lt.sawStatus(now, m.Status)
			}
		}
	case "Status":
		if m, ok := out.(provider.Message); ok && err == nil {
			lt.sawStatus(now, m.Status)
		}
	case "Send":
		// A replayed answer carries the message's status now.
		if so, ok := out.(activities.SendOutput); ok && err == nil {
			lt.sawStatus(now, so.Result.Status)
			lt.sawStatus(now, so.Looked) // the Send's own first look
		}
	}
}

// sawStatus keeps when a failed message of the event was first seen.
func (lt *lifetime) sawStatus(now time.Time, s provider.Status) {
	if s.Failed() && lt.failedSeen.IsZero() {
		lt.failedSeen = now
	}
	if s == provider.StatusDelivered && lt.deliveredSeen.IsZero() {
		lt.deliveredSeen = now
	}
}

func summary(name string, in, out any, err error) string {
	if err != nil {
		var app *temporal.ApplicationError
		if errors.As(err, &app) {
			return fmt.Sprintf("-> %s: %s", app.Type(), app.Error())
		}
		return "-> error: " + err.Error()
	}
	switch name {
	case "Send":
		si := in.(activities.SendInput)
		so := out.(activities.SendOutput)
		return fmt.Sprintf("%s -> %s %s", si.Request.Key, so.Result.Outcome, so.Result.MessageID)
	case "Reconcile":
		b, _ := json.Marshal(out)
		return "-> " + string(b)
	case "Status":
		m := out.(provider.Message)
		return fmt.Sprintf("%s -> %s", m.ID, m.Status)
	case "Prepare":
		p := out.(activities.PrepareOutput)
		return fmt.Sprintf("-> key %s, created %t, settled %t, %d earlier keys", p.Request.Key, p.Created, p.Settled != nil, len(p.SendKeys))
	}
	b, _ := json.Marshal(out)
	if len(b) > 160 {
		b = append(b[:160], "..."...)
	}
	return "-> " + string(b)
}

// workerInterceptor gives the segment's run its own run id (a reset
// makes a new run), emulates the server's unlimited activity retries
// (the test environment caps them at 10), makes a replacing run wait
// until the moment of the cut before it does anything new, and stops
// the workflow code of a cut segment.
type workerInterceptor struct {
	interceptor.WorkerInterceptorBase
	seg *segment
}

func (w *workerInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	seg := w.seg
	return infoEditor(next, func(info *activity.Info) { info.WorkflowExecution.RunID = seg.runID })
}

// infoEditor is an activity's inbound interceptor whose outbound side
// hands the activity its info as edit changes it.
func infoEditor(next interceptor.ActivityInboundInterceptor, edit func(*activity.Info)) interceptor.ActivityInboundInterceptor {
	return &activityIn{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, edit: edit}
}

type activityIn struct {
	interceptor.ActivityInboundInterceptorBase
	edit func(*activity.Info)
}

func (a *activityIn) Init(out interceptor.ActivityOutboundInterceptor) error {
	return a.Next.Init(&activityOut{ActivityOutboundInterceptorBase: interceptor.ActivityOutboundInterceptorBase{Next: out}, edit: a.edit})
}

type activityOut struct {
	interceptor.ActivityOutboundInterceptorBase
	edit func(*activity.Info)
}

func (a *activityOut) GetInfo(ctx context.Context) activity.Info {
	info := a.Next.GetInfo(ctx)
	a.edit(&info)
	return info
}

func (w *workerInterceptor) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &workflowIn{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}, seg: w.seg}
}

type workflowIn struct {
	interceptor.WorkflowInboundInterceptorBase
	seg *segment
}

func (w *workflowIn) Init(out interceptor.WorkflowOutboundInterceptor) error {
	return w.Next.Init(&workflowOut{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: out}, seg: w.seg})
}

type workflowOut struct {
	interceptor.WorkflowOutboundInterceptorBase
	seg *segment
}

func (w *workflowOut) GetInfo(ctx workflow.Context) *workflow.Info {
	info := *w.Next.GetInfo(ctx)
	info.WorkflowExecution.RunID = w.seg.runID
	return &info
}

// resume makes a replacing run wait, before its first new activity,
// until the moment the run it replaces was cut: the world has moved on.
func (w *workflowOut) resume(ctx workflow.Context) {
	s := w.seg
	s.mu.Lock()
	var until time.Time
	if s.resumed < len(s.resumes) && len(s.calls) >= s.resumes[s.resumed].call {
		until = s.resumes[s.resumed].at
		s.resumed++
	}
	s.mu.Unlock()
	if !until.IsZero() {
		if d := until.Sub(w.Next.Now(ctx)); d > 0 {
			_ = w.Next.Sleep(ctx, d)
		}
	}
}

func (w *workflowOut) ExecuteActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	w.seg.checkCut()
	w.resume(ctx)
	o := workflow.GetActivityOptions(ctx)
	if o.RetryPolicy == nil {
		o.RetryPolicy = &temporal.RetryPolicy{}
	} else {
		p := *o.RetryPolicy
		o.RetryPolicy = &p
	}
	if o.RetryPolicy.MaximumAttempts == 0 {
		// The server retries until the schedule-to-close timeout.
		o.RetryPolicy.MaximumAttempts = 1 << 20
	}
	if o.RetryPolicy.InitialInterval == 0 {
		o.RetryPolicy.InitialInterval = time.Second
	}
	if o.RetryPolicy.MaximumInterval == 0 {
		o.RetryPolicy.MaximumInterval = 100 * o.RetryPolicy.InitialInterval
	}
	ctx = workflow.WithActivityOptions(ctx, o)
	return cutFuture{w.Next.ExecuteActivity(ctx, activityType, args...), w.seg}
}

func (w *workflowOut) ExecuteLocalActivity(ctx workflow.Context, activityType string, args ...any) workflow.Future {
	w.seg.checkCut()
	w.resume(ctx)
	return cutFuture{w.Next.ExecuteLocalActivity(ctx, activityType, args...), w.seg}
}

func (w *workflowOut) NewTimer(ctx workflow.Context, d time.Duration) workflow.Future {
	w.seg.checkCut()
	return cutFuture{w.Next.NewTimer(ctx, d), w.seg}
}

func (w *workflowOut) NewTimerWithOptions(ctx workflow.Context, d time.Duration, o workflow.TimerOptions) workflow.Future {
	w.seg.checkCut()
	return cutFuture{w.Next.NewTimerWithOptions(ctx, d, o), w.seg}
}

func (w *workflowOut) Sleep(ctx workflow.Context, d time.Duration) error {
	w.seg.checkCut()
	err := w.Next.Sleep(ctx, d)
	w.seg.checkCut()
	return err
}

func (w *workflowOut) Await(ctx workflow.Context, cond func() bool) error {
	return w.Next.Await(ctx, func() bool { w.seg.checkCut(); return cond() })
}

func (w *workflowOut) AwaitWithTimeout(ctx workflow.Context, d time.Duration, cond func() bool) (bool, error) {
	ok, err := w.Next.AwaitWithTimeout(ctx, d, func() bool { w.seg.checkCut(); return cond() })
	w.seg.checkCut()
	return ok, err
}

func (w *workflowOut) AwaitWithOptions(ctx workflow.Context, o workflow.AwaitOptions, cond func() bool) (bool, error) {
	ok, err := w.Next.AwaitWithOptions(ctx, o, func() bool { w.seg.checkCut(); return cond() })
	w.seg.checkCut()
	return ok, err
}

// UpsertTypedSearchAttributes keeps what the run's search attributes
// hold after each upsert: the check compares them with the outcome, as
// a person's query in the UI would.
func (w *workflowOut) UpsertTypedSearchAttributes(ctx workflow.Context, attrs ...temporal.SearchAttributeUpdate) error {
	err := w.Next.UpsertTypedSearchAttributes(ctx, attrs...)
	sa := w.Next.GetTypedSearchAttributes(ctx)
	state, _ := sa.GetKeyword(contract.StateAttribute)
	prov, _ := sa.GetKeyword(contract.ProviderAttribute)
	w.seg.mu.Lock()
	w.seg.search = searchAttributes{state: state, provider: prov}
	w.seg.mu.Unlock()
	return err
}

// cutFuture stops the workflow code when it reads a result after the
// segment was cut.
type cutFuture struct {
	workflow.Future
	seg *segment
}

func (f cutFuture) Get(ctx workflow.Context, v any) error {
	err := f.Future.Get(ctx, v)
	f.seg.checkCut()
	return err
}
