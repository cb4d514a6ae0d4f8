package activities

import (
	"fmt"
	"time"
)

// Policy holds the durations that govern one provider's sends. It is worker
// configuration: the workflow receives it once, from Prepare, and keeps it
// in its history, so a change applies to new events only.
type Policy struct {
	// ReplayWindow is how long the provider keeps a completed answer for
	// replay. Bird documents three hours; Sendy publishes none, so it is a
	// setting with the same default.
	ReplayWindow time.Duration `json:"replayWindow"`
	// WindowMargin ends the send's retries this long before the window
	// closes, counted from the key's first attempt. Default 10 minutes.
	WindowMargin time.Duration `json:"windowMargin"`
	// AttemptTimeout bounds one HTTP attempt (the client's timeout). The
	// send activity's start-to-close is this plus AttemptSlack, plus
	// FirstLookTime when it looks its message up first. Default 15 s.
	AttemptTimeout time.Duration `json:"attemptTimeout"`
	// InitialBackoff and MaxBackoff shape the retries of unknown and
	// not-executed outcomes. Defaults 1 s and 5 minutes.
	InitialBackoff time.Duration `json:"initialBackoff"`
	MaxBackoff     time.Duration `json:"maxBackoff"`
	// InProgressDelay is the wait after Bird's 409 E01004 before the same
	// request is tried again. Default 5 s (the lock lives at most 30 s).
	InProgressDelay time.Duration `json:"inProgressDelay"`
	// StatusPollInitial and StatusPollMax space the delivery-status
	// lookups; the interval doubles up to the max. Defaults 10 s and 10 min.
	StatusPollInitial time.Duration `json:"statusPollInitial"`
	StatusPollMax     time.Duration `json:"statusPollMax"`
	// TrackingLimit stops following delivery after acceptance. Default 24 h.
	TrackingLimit time.Duration `json:"trackingLimit"`
	// ReconcileBudget bounds the retries of one reconciliation. Default 30 min.
	ReconcileBudget time.Duration `json:"reconcileBudget"`
	// DecisionDeadline is how long a run waits for resend or cancel before
	// it ends as failed, "no decision". Default 72 h.
	DecisionDeadline time.Duration `json:"decisionDeadline"`
	// LateEffectHorizon is how long after an attempt began it may still
	// take effect at the provider when it ended without a certain answer:
	// a hung request outlives its client and, at Bird, its in-flight lock.
	// After an uncertain attempt the run looks for a second message again
	// once this has passed, and once more before it settles. Default 1
	// minute: Bird's lock lifetime (30 s) plus the attempt timeout (15 s),
	// with margin. Validate refuses less than ProviderLockLifetime plus
	// AttemptTimeout.
	LateEffectHorizon time.Duration `json:"lateEffectHorizon"`
	// ReconcileRetry is how often a run awaiting a decision because its
	// reconciliation failed tries the search again. Default 10 minutes.
	ReconcileRetry time.Duration `json:"reconcileRetry"`
	// LookupsPaced says that the provider's status lookups are held to a
	// fleet-wide rate (its lookup task queue has a rate limit), where
	// every dispatch of a lookup counts, even one that asks nothing. A run
	// then waits for its first lookup on a timer; otherwise the lookup
	// activity's first attempt is the wait (StatusInput.FirstWait). The
	// worker sets it from the provider's rate limit.
	LookupsPaced bool `json:"lookupsPaced,omitempty"`
}

// AttemptSlack is what the send activity needs beyond the HTTP attempt:
// the ledger writes before and after it.
const AttemptSlack = 5 * time.Second

// ProviderLockLifetime is how long Bird's in-flight lock on a key lives:
// a request that hangs holds it, and can still take effect, for up to
// this long. It is the floor of every late-effect horizon, with the
// attempt timeout, because a hung request also outlives its client.
const ProviderLockLifetime = 30 * time.Second

// DefaultPolicy returns the defaults documented on Policy.
func DefaultPolicy() Policy {
	return Policy{
		ReplayWindow:      3 * time.Hour,
		WindowMargin:      10 * time.Minute,
		AttemptTimeout:    15 * time.Second,
		InitialBackoff:    time.Second,
		MaxBackoff:        5 * time.Minute,
		InProgressDelay:   5 * time.Second,
		StatusPollInitial: 10 * time.Second,
		StatusPollMax:     10 * time.Minute,
		TrackingLimit:     24 * time.Hour,
		ReconcileBudget:   30 * time.Minute,
		DecisionDeadline:  72 * time.Hour,
		LateEffectHorizon: time.Minute,
		ReconcileRetry:    10 * time.Minute,
	}
}

// WithDefaults fills zero fields from DefaultPolicy.
func (p Policy) WithDefaults() Policy {
	d := DefaultPolicy()
	for _, f := range []struct{ v, def *time.Duration }{
		{&p.ReplayWindow, &d.ReplayWindow}, {&p.WindowMargin, &d.WindowMargin}, {&p.AttemptTimeout, &d.AttemptTimeout},
		{&p.InitialBackoff, &d.InitialBackoff}, {&p.MaxBackoff, &d.MaxBackoff}, {&p.InProgressDelay, &d.InProgressDelay},
		{&p.StatusPollInitial, &d.StatusPollInitial}, {&p.StatusPollMax, &d.StatusPollMax}, {&p.TrackingLimit, &d.TrackingLimit},
		{&p.ReconcileBudget, &d.ReconcileBudget}, {&p.DecisionDeadline, &d.DecisionDeadline},
		{&p.LateEffectHorizon, &d.LateEffectHorizon}, {&p.ReconcileRetry, &d.ReconcileRetry},
	} {
		if *f.v == 0 {
			*f.v = *f.def
		}
	}
	return p
}

// LastAttemptLead is how long before the end of the send budget the last
// attempt of a key is scheduled: time for the run's next workflow task
// and a worker to pick the attempt up before the Send activity's own
// window check would refuse it. It is the attempt timeout, at most
// AttemptSlack. (It shapes the timers of runs in flight: changing it
// needs a new workflow version.) A run whose worker comes later than that
// reconciles instead.
func (p Policy) LastAttemptLead() time.Duration { return min(p.AttemptTimeout, AttemptSlack) }

// SendBudget is how long after a key's first attempt its last attempt may
// start: the replay window minus the margin.
func (p Policy) SendBudget() time.Duration { return p.ReplayWindow - p.WindowMargin }

// Validate reports a policy that cannot protect anything, naming the fix.
func (p Policy) Validate() error {
	if p.SendBudget() <= p.AttemptTimeout+AttemptSlack {
		return fmt.Errorf("replay window %s minus margin %s leaves no room for one %s attempt: shorten the margin or the attempt timeout", p.ReplayWindow, p.WindowMargin, p.AttemptTimeout)
	}
	for name, d := range map[string]time.Duration{
		"window margin": p.WindowMargin, "attempt timeout": p.AttemptTimeout, "initial backoff": p.InitialBackoff,
		"max backoff": p.MaxBackoff, "in-progress delay": p.InProgressDelay, "status poll": p.StatusPollInitial,
		"status poll max": p.StatusPollMax, "tracking limit": p.TrackingLimit, "reconcile budget": p.ReconcileBudget,
		"decision deadline": p.DecisionDeadline, "late-effect horizon": p.LateEffectHorizon, "reconcile retry": p.ReconcileRetry,
	} {
		if d <= 0 {
			return fmt.Errorf("%s is %s: it must be positive", name, d)
		}
	}
	// Below the floor the run would stop looking for a second message
	// while a hung attempt can still make one.
	if floor := ProviderLockLifetime + p.AttemptTimeout; p.LateEffectHorizon < floor {
		return fmt.Errorf("late-effect horizon %s is shorter than one attempt (%s) plus Bird's in-flight lock (%s): "+
			"a hung request holds Bird's in-flight lock for up to %s and outlives its client's attempt timeout (%s), so it can take effect until then, "+
			"after the run stopped looking for a second message; make it at least %s",
			p.LateEffectHorizon, p.AttemptTimeout, ProviderLockLifetime, ProviderLockLifetime, p.AttemptTimeout, floor)
	}
	if p.MaxBackoff < p.InitialBackoff || p.StatusPollMax < p.StatusPollInitial {
		return fmt.Errorf("a maximum interval is below its initial interval (backoff %s..%s, status poll %s..%s)", p.InitialBackoff, p.MaxBackoff, p.StatusPollInitial, p.StatusPollMax)
	}
	return nil
}
