package activities

// Send: one attempt at the provider, recorded in the ledger.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/acme/smsorch/internal/metrics/name"
	"github.com/acme/smsorch/internal/tracing"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/sms"
)

// SendInput is one send: the planned request and how long its key may be tried.
type SendInput struct {
	EventKey string           `json:"eventKey"`
	Request  provider.Request `json:"request"`
	// Budget is how long after the key's first recorded attempt another
	// attempt may start (Policy.SendBudget).
	Budget time.Duration `json:"budget"`
	// InProgressDelay is the retry delay after 409 E01004.
	InProgressDelay time.Duration `json:"inProgressDelay"`
	// LedgerID is the ledger that claimed the event (PrepareOutput).
	LedgerID string `json:"ledgerId,omitempty"`
	// AfterRetries marks a Send of a key that the run already sent under
	// in an earlier activity (the last attempt after the retries, or any
	// later Send of the key): a new activity after
	// the retries' one: its ledger rows are numbered after theirs, so it
	// never overwrites the record of an earlier attempt of the run.
	AfterRetries bool `json:"afterRetries,omitempty"`
	// Look, when set, makes the attempt that gets the message accepted
	// look it up once and settle a delivered one (FirstLook).
	Look *FirstLook `json:"look,omitempty"`
}

// SendOutput is the attempt that got the message accepted.
type SendOutput struct {
	Result provider.Result `json:"result"`
	// Attempt is the activity attempt that succeeded (1 for the first).
	Attempt int32 `json:"attempt"`
	// Uncertain is true when an earlier attempt under this key, in this
	// run or an earlier one, ended without a certain answer or never
	// ended: the provider may hold a second message for the key, which
	// the workflow then looks for.
	Uncertain bool `json:"uncertain"`
	// UncertainSince is the start of the latest such attempt: it may
	// still take effect until the policy's LateEffectHorizon has passed,
	// so the workflow looks again then.
	UncertainSince time.Time `json:"uncertainSince"`
	// AcceptedAt is when the answer came, on the worker's clock: with a
	// FirstLook, the run learns of it only after the look.
	AcceptedAt time.Time `json:"acceptedAt"`
	// Looked is the status the FirstLook found, empty when it made no
	// look or the look failed.
	Looked provider.Status `json:"looked,omitempty"`
	// Settled is the ledger's outcome after the FirstLook's settle, nil
	// when the Send did not settle the event.
	Settled *SettleOutput `json:"settled,omitempty"`
}

// SendFailure is the details of a failed attempt's ApplicationError.
type SendFailure struct {
	Result  provider.Result `json:"result"`
	Attempt int32           `json:"attempt"`
}

// Send makes one attempt with the planned bytes. It writes the attempt to
// the ledger before the HTTP call and completes it after, and refuses to
// start once the key's replay window (minus margin) has passed since its
// first attempt: past it, only reconciliation may decide about a resend.
//
// With a FirstLook, the attempt then looks its accepted message up; the
// send itself keeps the deadline it has without the look
// (FirstLook.SendWithin), so the look's time never lets a request leave
// later after the attempt's start than it could without it: the late
// look for a second message is timed by that (Policy.LateEffectHorizon).
func (a *Activities) Send(ctx context.Context, in SendInput) (SendOutput, error) {
	sendCtx, cancel := sendPart(ctx, in)
	defer cancel()
	out, err := a.send(sendCtx, in)
	if err == nil {
		a.firstLook(ctx, in, &out)
	}
	return out, err
}

// sendPart is the context of the send up to its answer: with a
// FirstLook, it ends SendWithin after the attempt started.
func sendPart(ctx context.Context, in SendInput) (context.Context, context.CancelFunc) {
	if in.Look == nil || in.Look.SendWithin <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, activity.GetInfo(ctx).StartedTime.Add(in.Look.SendWithin))
}

// send is one attempt, up to its answer.
func (a *Activities) send(ctx context.Context, in SendInput) (SendOutput, error) {
	begun := time.Now() // the time the activity's deadline left it is read from here, before the ledger's reads
	info := activity.GetInfo(ctx)
	req := in.Request
	tracing.Annotate(ctx, tracing.EventKey.String(in.EventKey), tracing.SendKey.String(req.Key), tracing.Provider.String(string(req.Provider)))
	c, err := a.client(string(req.Provider))
	if err != nil {
		return SendOutput{}, err
	}
	if err := a.checkLedger(in.LedgerID); err != nil {
		return SendOutput{}, err
	}
	now, err := a.windowOpen(ctx, in)
	if err != nil {
		return SendOutput{}, err
	}
	number := int(info.Attempt)
	if in.AfterRetries {
		base, err := a.lastNumber(ctx, in.EventKey, req.Key, info.WorkflowExecution.RunID)
		if err != nil {
			return SendOutput{}, err // nothing sent yet: safe to retry
		}
		number += base
	}
	tracing.Annotate(ctx, tracing.Attempt.Int(number))
	if err := a.timeForAnAnswer(ctx, in, begun); err != nil {
		return SendOutput{}, err
	}
	row := ledger.Attempt{
		EventKey: in.EventKey, SendKey: req.Key, RunID: info.WorkflowExecution.RunID, Number: number,
		Fingerprint: req.Fingerprint(), StartedAt: now,
	}
	if err := a.Ledger.BeginAttempt(ctx, row); errors.Is(err, ledger.ErrFenced) {
		return SendOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrFenced, nil)
	} else if err != nil {
		return SendOutput{}, err // nothing sent yet: safe to retry
	}

	res := c.Send(ctx, req)
	tracing.Annotate(ctx, tracing.Outcome.String(string(res.Outcome)))
	a.recordAnswer(ctx, in, row, res)

	if res.Outcome.Sent() {
		// Earlier runs count too: a run that resumed the event starts
		// again at activity attempt 1.
		out := SendOutput{Result: res, Attempt: info.Attempt, AcceptedAt: a.now()}
		out.UncertainSince = a.earlierUncertain(ctx, in.EventKey, row)
		out.Uncertain = !out.UncertainSince.IsZero()
		a.recordPossibleDuplicate(ctx, in.EventKey, c, res, out.Uncertain)
		if out.Uncertain && res.Outcome == provider.Replayed {
			a.recordLateReplay(ctx, in.EventKey, c, res, row)
		}
		return out, nil
	}
	return SendOutput{}, AttemptError(res, info.Attempt, in.InProgressDelay)
}

// recordPossibleDuplicate writes to the ledger, at once, that the event
// may have two messages: a new message (not a replay) after an earlier
// attempt of the key without a certain answer, at a provider that cannot
// be searched by key (no provider.Lister), is what the workflow reports
// as a possible duplicate. The run itself records it only when it
// settles; a Temporal reset before then starts a run whose Send gets a
// replay of that message and would not know. Its settle takes the
// finding from the ledger. The write gets its own 10 s, whatever is left
// of the send's: the answer is in hand. A ledger that cannot be written
// is logged; this run still reports it, a run a reset starts may not.
func (a *Activities) recordPossibleDuplicate(ctx context.Context, eventKey string, c provider.Client, res provider.Result, uncertain bool) {
	if _, searchable := c.(provider.Lister); searchable || !uncertain || res.Outcome != provider.Accepted {
		return
	}
	a.writePossibleDuplicate(ctx, eventKey, "this run reports it when it settles, but a run a Temporal reset starts before then would not")
}

// writePossibleDuplicate writes the finding to the ledger with its own
// 10 s, whatever is left of the send's: the answer is in hand. A ledger
// that cannot be written is logged with what is lost (unsaid).
func (a *Activities) writePossibleDuplicate(ctx context.Context, eventKey, unsaid string) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := a.Ledger.Record(wctx, eventKey, nil, []string{ledger.FindingPossibleDuplicate}); err != nil {
		a.log().Warn("could not record a possible duplicate in the ledger: "+unsaid, zap.String("key", eventKey), zap.Error(err))
	}
}

// ProviderClockSlack is how far a provider's clock (a message's
// created_at) may be from the ledger's.
const ProviderClockSlack = 2 * time.Minute

// recordLateReplay writes a possible duplicate to the ledger when a
// replay, at a provider that cannot be searched by key, returns a
// message the provider made after an earlier attempt of the key could
// no longer take effect (its start, plus the late-effect horizon and
// the clocks' slack): that attempt did not make the message replayed.
// Either it sent nothing, or the provider made a message for it and
// forgot the key before the retention the workers assume (Sendy's is
// not published), so the replay came from a second one. No run can
// search for the first, so the event says a duplicate is possible; the
// run reads it from the ledger when it settles.
func (a *Activities) recordLateReplay(ctx context.Context, eventKey string, c provider.Client, res provider.Result, this ledger.Attempt) {
	if _, searchable := c.(provider.Lister); searchable || res.CreatedAt.IsZero() {
		return
	}
	// Its own 10 s, whatever is left of the send's: the answer is in hand.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	attempts, err := a.Ledger.Attempts(rctx, eventKey)
	if err != nil {
		a.log().Warn("could not read the earlier attempts of a key to weigh a replay against them: a second message under it, which Sendy may have made and forgotten, is not reported", zap.String("key", this.SendKey), zap.Error(err))
		return
	}
	by := a.policy(c.Name()).LateEffectHorizon + ProviderClockSlack
	for _, at := range attempts {
		if at.SendKey == this.SendKey && (at.RunID != this.RunID || at.Number != this.Number) && at.Uncertain() && res.CreatedAt.After(at.StartedAt.Add(by)) {
			a.log().Warn("a replay returned a message made after an earlier attempt of its key could no longer take effect: that attempt may have sent a message the provider forgot; recording a possible duplicate",
				zap.String("key", this.SendKey), zap.Time("attemptStarted", at.StartedAt), zap.Time("messageCreated", res.CreatedAt))
			a.writePossibleDuplicate(ctx, eventKey, "a run of the event may not report it")
			return
		}
	}
}

// windowOpen refuses an attempt once the key's replay window has passed
// since its first attempt: past it, only reconciliation may decide about
// a resend. The window counts on the ledger's clock, from the first
// attempt as the ledger recorded it, whichever worker made it; now is
// that clock's time.
func (a *Activities) windowOpen(ctx context.Context, in SendInput) (now time.Time, err error) {
	if now, err = a.Ledger.Now(ctx); err != nil {
		return now, err
	}
	first, tried, err := a.Ledger.FirstAttempt(ctx, in.Request.Key)
	if err != nil {
		return now, err
	}
	if tried && now.After(first.Add(in.Budget)) {
		return now, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("the replay window of %s closed: first attempt %s, budget %s; another attempt could send a second SMS, so the run reconciles instead",
				in.Request.Key, first.UTC().Format(time.RFC3339), in.Budget), ErrWindowClosed, nil)
	}
	return now, nil
}

// timeForAnAnswer refuses an attempt that the activity's deadline (the
// end of the retries' share of the window) would cut short: it would end
// with its outcome unknown where the provider might have answered,
// turning a certain history into an uncertain one. Nothing is sent, and
// the run's last attempt before the window closes gets its full time.
func (a *Activities) timeForAnAnswer(ctx context.Context, in SendInput, begun time.Time) error {
	deadline, ok := ctx.Deadline()
	if !ok {
		return nil
	}
	info := activity.GetInfo(ctx)
	req := in.Request
	// The run's attempt time, which its start-to-close holds with the
	// slack, capped by the client's own timeout on this worker.
	need := a.policy(req.Provider).AttemptTimeout
	stc := info.StartToCloseTimeout
	if in.Look != nil && in.Look.SendWithin > 0 {
		stc = in.Look.SendWithin // the rest is the look's
	}
	if run := stc - AttemptSlack; run > 0 {
		need = min(need, run)
	}
	left := deadline.Sub(begun)
	if left >= need {
		return nil
	}
	reason := fmt.Sprintf("no attempt made: the activity started with %s left before its deadline, less than the %s an answer may take; nothing was sent",
		left.Round(time.Millisecond), need)
	// The person reading the run's timeline wants the provider's last
	// answer, not this.
	if last := a.lastAnswer(ctx, in.EventKey, req.Key); last != "" {
		reason = last + " (the last answer; then " + reason + ")"
	} else {
		reason = string(req.Provider) + ": " + reason
	}
	tracing.Annotate(ctx, tracing.Outcome.String(string(provider.NotExecuted)))
	return temporal.NewApplicationErrorWithOptions(reason, ErrNotExecuted, temporal.ApplicationErrorOptions{
		Details:  []any{SendFailure{Result: provider.Result{Outcome: provider.NotExecuted, Reason: reason}, Attempt: info.Attempt - 1}},
		Category: temporal.ApplicationErrorCategoryBenign,
	})
}

// recordAnswer writes the attempt's answer to the ledger (its open row
// stays as evidence when the write fails), and counts and logs it.
func (a *Activities) recordAnswer(ctx context.Context, in SendInput, row ledger.Attempt, res provider.Result) {
	req := in.Request
	row.EndedAt, row.Outcome, row.HTTPStatus, row.Code = a.now(), string(res.Outcome), res.HTTPStatus, res.Code
	row.MessageID, row.Replay, row.Reason = res.MessageID, res.Outcome == provider.Replayed, res.Reason
	log := a.log().With(zap.String("key", req.Key), zap.String("provider", string(req.Provider)),
		zap.String("to", sms.MaskPhone(req.To)), zap.Int32("attempt", activity.GetInfo(ctx).Attempt), tracing.LogTraceID(ctx))
	if err := a.Ledger.EndAttempt(context.WithoutCancel(ctx), row); err != nil {
		// The answer stands; the open row remains as evidence of the attempt.
		log.Error("could not record the end of a send attempt in the ledger", zap.Error(err))
	}
	mh := activity.GetMetricsHandler(ctx).WithTags(map[string]string{"provider": string(req.Provider)})
	mh.WithTags(map[string]string{"outcome": string(res.Outcome)}).Counter(name.Sends).Inc(1)
	if res.Outcome == provider.Replayed {
		mh.Counter(name.Replays).Inc(1)
	}
	if res.KeyConflict {
		mh.Counter(name.Conflicts).Inc(1)
	}
	log.Info("sms send attempt", zap.String("outcome", string(res.Outcome)), zap.Int("status", res.HTTPStatus),
		zap.String("code", res.Code), zap.String("message", res.MessageID),
		zap.Bool("replay", res.Outcome == provider.Replayed), zap.String("reason", res.Reason))
}

// lastAnswer is the reason the latest ended attempt of a key recorded,
// "" when there is none or the ledger does not answer.
func (a *Activities) lastAnswer(ctx context.Context, eventKey, sendKey string) string {
	attempts, err := a.Ledger.Attempts(ctx, eventKey)
	if err != nil {
		return ""
	}
	var last ledger.Attempt
	for _, at := range attempts {
		if at.SendKey == sendKey && !at.Open() && at.Reason != "" && !at.EndedAt.Before(last.EndedAt) {
			last = at
		}
	}
	return last.Reason
}

// lastNumber is the highest attempt number the run recorded for a key.
func (a *Activities) lastNumber(ctx context.Context, eventKey, sendKey, runID string) (int, error) {
	attempts, err := a.Ledger.Attempts(ctx, eventKey)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, at := range attempts {
		if at.SendKey == sendKey && at.RunID == runID {
			n = max(n, at.Number)
		}
	}
	return n, nil
}

// AttemptError turns an attempt that did not get the message accepted into
// the ApplicationError whose type the retry policy matches.
func AttemptError(res provider.Result, attempt int32, inProgressDelay time.Duration) error {
	opts := temporal.ApplicationErrorOptions{Details: []any{SendFailure{Result: res, Attempt: attempt}}}
	var typ string
	switch res.Outcome {
	case provider.NotExecuted:
		typ, opts.NextRetryDelay = ErrNotExecuted, res.RetryAfter
	case provider.InProgress:
		typ, opts.NextRetryDelay = ErrInProgress, inProgressDelay
	case provider.RateLimited:
		typ, opts.NextRetryDelay = ErrRateLimited, res.RetryAfter
	case provider.Rejected:
		typ, opts.NonRetryable = ErrRejected, true
		if res.KeyConflict {
			typ = ErrKeyConflict
		}
	default:
		typ, opts.NextRetryDelay = ErrUnknownOutcome, res.RetryAfter
	}
	if !opts.NonRetryable {
		// An outcome the retry policy retries is expected, not a failure:
		// the SDK logs it at debug and counts no activity failure for it.
		opts.Category = temporal.ApplicationErrorCategoryBenign
	}
	return temporal.NewApplicationErrorWithOptions(res.Reason, typ, opts)
}

// earlierUncertain returns the start of the latest other attempt of this
// key, in any run, that ended without a certain answer or never ended;
// zero when there is none.
func (a *Activities) earlierUncertain(ctx context.Context, eventKey string, this ledger.Attempt) time.Time {
	attempts, err := a.Ledger.Attempts(ctx, eventKey)
	if err != nil {
		// Cannot tell: take this attempt's own start, so the workflow
		// looks now and again once a late effect would show.
		a.log().Warn("could not read the earlier attempts of a key; looking for a second message anyway", zap.String("key", this.SendKey), zap.Error(err))
		return this.StartedAt
	}
	return lastUncertain(attempts, func(at ledger.Attempt) bool {
		return at.SendKey == this.SendKey && (at.RunID != this.RunID || at.Number != this.Number)
	})
}
