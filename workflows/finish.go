package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/metrics/name"
	"github.com/acme/smsorch/sms"
)

func (r *run) fail(reason string) (contract.Result, error) {
	r.st.State, r.st.Reason = contract.Failed, reason
	r.note("%s", reason)
	return r.finish()
}

// finish settles the event in the ledger and ends the run: Completed for
// Delivered, Accepted and Duplicate, Canceled for Cancelled, Failed for
// Failed, each carrying the Result.
func (r *run) finish() (contract.Result, error) {
	r.upsertSearch()
	if r.claimed && r.fixed() {
		r.lastLook()
		r.settle()
	} else if r.claimed {
		ctx := workflow.WithActivityOptions(r.ctx, workflow.ActivityOptions{
			StartToCloseTimeout:    30 * time.Second,
			ScheduleToCloseTimeout: 24 * time.Hour,
			RetryPolicy:            &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 5 * time.Minute},
		})
		if err := workflow.ExecuteActivity(ctx, a.Settle, activities.SettleInput{
			Key: r.in.Key, Outcome: string(r.st.State), Reason: r.st.Reason, MessageID: r.primary, LedgerID: r.ledgerID,
		}).Get(ctx, nil); err != nil {
			r.note("could not settle the event in the ledger: %s", errorMessage(err))
		}
	}
	res := r.st.Result
	r.log.Info("sms run ended", "key", r.in.Key, "state", string(res.State), "reason", sms.MaskPhones(res.Reason),
		"messages", strings.Join(res.MessageIDs, ","), "attempts", res.Attempts, "replays", res.Replays)
	switch res.State {
	case contract.Cancelled:
		return res, temporal.NewCanceledError(res)
	case contract.Failed:
		return res, temporal.NewNonRetryableApplicationError(res.Reason, contract.FailureType, nil, res)
	}
	return res, nil
}

// lastLook waits, where an attempt ended without a certain answer, until
// it can no longer take effect, and looks for a second message once more
// before the run settles.
func (r *run) lastLook() {
	if r.recheckAt.IsZero() || len(r.st.KeysUsed) == 0 {
		return
	}
	if wait := r.recheckAt.Sub(workflow.Now(r.ctx)); wait > 0 {
		r.note("waiting until %s before settling: an attempt without a certain answer could still take effect", r.recheckAt.UTC().Format(time.RFC3339))
		_ = workflow.Sleep(r.ctx, wait)
	}
	alive := r.recheck("before settling")
	if alive && r.v >= versionLateEffectFirst && (r.st.State == contract.Cancelled || r.st.State == contract.Failed) {
		// What was sent stands, whatever was decided before it showed up.
		r.st.Reason = fmt.Sprintf("message %s of the event turned up after the run had ended %s (%s): the SMS was sent after all", r.primary, r.st.State, r.st.Reason)
		r.st.State = contract.Accepted
		r.note("%s", r.st.Reason)
	}
}

// settle records the outcome in the ledger, retried until it is written;
// a ledger that stays unwritable for a day fails the run visibly rather
// than let it end as if the outcome were recorded. The first settle of an
// event wins: a different outcome already stored is noted.
func (r *run) settle() {
	defer func() {
		mh := workflow.GetMetricsHandler(r.ctx).WithTags(map[string]string{"provider": r.st.Provider})
		mh.WithTags(map[string]string{"state": string(r.st.State)}).Counter(name.Settled).Inc(1)
		switch {
		case r.st.DuplicateSend:
			mh.WithTags(map[string]string{"kind": "proven"}).Counter(name.Duplicates).Inc(1)
		case r.st.PossibleDuplicate:
			mh.WithTags(map[string]string{"kind": "possible"}).Counter(name.Duplicates).Inc(1)
		}
	}()
	opts := workflow.ActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: 24 * time.Hour,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 5 * time.Minute,
			MaximumAttempts: 24 * 12, // the day bounds it; explicit for the SDK's test environment
		},
	}
	var out activities.SettleOutput
	err := r.ledgerStep("Settle", opts, a.Settle, activities.SettleInput{
		Key: r.in.Key, Outcome: string(r.st.State), Reason: r.st.Reason, MessageID: r.primary, LedgerID: r.ledgerID,
	}, &out)
	switch {
	case err != nil:
		was := r.st.State
		r.st.State = contract.Failed
		r.st.Reason = fmt.Sprintf("the outcome %s (%s) could not be recorded in the ledger: %s. The ledger does not know the event settled: fix the ledger, then check the event with smsctl audit before starting it again",
			was, r.st.Reason, errorMessage(err))
		r.note("%s", r.st.Reason)
		r.upsertSearch()
	case out.Outcome != string(r.st.State):
		r.note("the ledger already held the outcome %s for the event (settled %s: %s); the first settle stands there",
			out.Outcome, out.SettledAt.UTC().Format(time.RFC3339), out.Reason)
	}
}
