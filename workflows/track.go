package workflows

import (
	"errors"
	"fmt"
	"math"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/provider"
)

// track follows the delivery status of the accepted message until it is
// final or the tracking limit passes.
func (r *run) track() (contract.State, bool) {
	id := r.msgs.primary
	limit := workflow.Now(r.ctx).Add(r.policy.TrackingLimit)
	interval := r.policy.StatusPollInitial
	if r.msgs.firstLooked == id {
		// The Send made the first lookup: the next comes an interval
		// later, twice the first.
		interval = min(2*interval, r.policy.StatusPollMax)
	}
	r.msgs.firstLooked = ""
	// The answer that accepted the message (a replay carries the
	// message's status) or the search that found it may already say how
	// it ended.
	if next, final := r.finalStatus(id, provider.Status(r.st.DeliveryStatus)); final {
		return next, false
	}
	for first := true; ; first = false {
		left := limit.Sub(workflow.Now(r.ctx))
		if left <= 0 {
			r.st.Reason = fmt.Sprintf("accepted as message %s; delivery not confirmed within %s (last status %s)", id, r.policy.TrackingLimit, r.st.DeliveryStatus)
			r.note(contract.KindEnded, "%s", r.st.Reason)
			// Its own state: a closed run, unlike Accepted, which an open
			// run has while it tracks delivery.
			return contract.Unconfirmed, false
		}
		m, looked, err := r.nextLookup(id, limit, interval, first)
		interval = min(2*interval, r.policy.StatusPollMax)
		if !looked {
			continue // the limit is reached: the loop's start ends the run
		}
		if err != nil {
			if !notFinalYet(err) {
				r.note(contract.KindStatus, "status lookup of %s failed, trying again later: %s", id, errorMessage(err))
			}
			continue
		}
		if string(m.Status) != r.st.DeliveryStatus {
			r.st.DeliveryStatus = string(m.Status)
			r.note(contract.KindStatus, "message %s is %s", id, m.Status)
		}
		if next, final := r.finalStatus(id, m.Status); final {
			return next, false
		}
	}
}

// nextLookup waits up to interval (less where the late look is due
// sooner) and looks message id up until its status is final, the limit,
// or the late look. The first wait of a run whose provider's lookups are
// not paced is the lookup activity's own first attempt: no timer, and no
// workflow task before the first lookup; the lookups keep their schedule
// (wait, then the doubled intervals). looked is false when the limit
// came first.
func (r *run) nextLookup(id string, limit time.Time, interval time.Duration, first bool) (m provider.Message, looked bool, err error) {
	wait := min(interval, limit.Sub(workflow.Now(r.ctx)))
	if r.recheckPending() {
		wait = max(min(wait, r.look.lateAt.Sub(workflow.Now(r.ctx))), 0)
	} else if first && !r.policy.LookupsPaced && limit.Sub(workflow.Now(r.ctx))-wait >= time.Second {
		m, err = r.lookUntilFinal(id, limit, interval, wait)
		return m, true, err
	}
	_ = workflow.Sleep(r.ctx, wait)
	if r.recheckPending() && !workflow.Now(r.ctx).Before(r.look.lateAt) {
		r.recheck("while tracking delivery")
	}
	if limit.Sub(workflow.Now(r.ctx)) < time.Second {
		return m, false, nil
	}
	m, err = r.lookUntilFinal(id, limit, min(2*interval, r.policy.StatusPollMax), 0)
	return m, true, err
}

// finalStatus reads a final status of the message the run follows: the
// next state, and whether there is one.
func (r *run) finalStatus(id string, s provider.Status) (contract.State, bool) {
	switch {
	case s == provider.StatusDelivered:
		r.st.Reason = activities.DeliveredReason(id)
		return contract.Delivered, true
	case s.Failed():
		r.seen(id, s)
		if other := r.liveHere(); other != "" {
			// Another message of the event is alive (a duplicate the run
			// already reported): the phone may well get it, and a resend
			// would make one more. Follow it instead.
			r.msgs.primary, r.st.DeliveryStatus = other, ""
			r.note(contract.KindFound, "message %s ended %s, but message %s of the event is alive: following it instead of asking for a resend", id, s, other)
			return contract.Accepted, true
		}
		r.msgs.primaryFailed = true
		r.st.Reason = fmt.Sprintf("message %s ended %s: a resend is a new message under a new key", id, s)
		return contract.AwaitingDecision, true
	}
	return "", false
}

// lookUntilFinal looks the message up until its status is final, as one
// Status activity whose retries, first after interval and then doubling
// up to StatusPollMax, are the polling schedule: no workflow task for a
// lookup that finds nothing new. It ends at the tracking limit, or
// earlier when the late look for a second message is due. With a
// firstWait the first attempt only waits (StatusInput.FirstWait): the
// first lookup comes firstWait later, the next interval after it. A
// lookup that ran out of its budget leaves the last status it saw in
// the run (lastStatus).
func (r *run) lookUntilFinal(id string, limit time.Time, interval, firstWait time.Duration) (provider.Message, error) {
	now := workflow.Now(r.ctx)
	budget := limit.Sub(now)
	if r.recheckPending() {
		if d := r.look.lateAt.Sub(now); d > 0 && d < budget {
			budget = d
		}
	}
	attempts := int64(budget/interval) + 2
	if firstWait > 0 {
		attempts++ // the wait's own
	}
	ctx := workflow.WithActivityOptions(r.ctx, r.onQueue(workflow.ActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: budget,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: interval, BackoffCoefficient: 2, MaximumInterval: r.policy.StatusPollMax,
			// The budget ends the lookups; the cap is explicit because 0
			// means 10 in the SDK's test environment.
			MaximumAttempts: int32(min(attempts, math.MaxInt32)),
		},
	}, contract.PriorityLookup))
	var m provider.Message
	in := activities.StatusInput{Provider: r.st.Provider, MessageID: id, UntilFinal: true, FirstWait: firstWait}
	err := workflow.ExecuteActivity(ctx, a.Status, in).Get(ctx, &m)
	r.lastStatus(err)
	return m, err
}

// lastStatus records the status the last lookup of a lookUntilFinal
// that ended unfinished saw (ErrNotFinal carries it), so the run shows
// "sent" while it waits for "delivered".
func (r *run) lastStatus(err error) {
	var appErr *temporal.ApplicationError
	var m provider.Message
	if !errors.As(err, &appErr) || appErr.Type() != activities.ErrNotFinal || !appErr.HasDetails() || appErr.Details(&m) != nil {
		return
	}
	if m.Status != "" && string(m.Status) != r.st.DeliveryStatus {
		r.st.DeliveryStatus = string(m.Status)
		r.note(contract.KindStatus, "message %s is %s", m.ID, m.Status)
	}
}

// liveHere is the first message of the event last seen alive at the
// provider in use, whose status the run can look up; "" if none.
func (r *run) liveHere() string {
	for _, id := range r.msgs.live {
		if at, ok := r.msgs.idAt[id]; !ok || at == canonical(r.st.Provider) {
			return id
		}
	}
	return ""
}
