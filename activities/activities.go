// Package activities holds the send workflow's activities: claiming the
// event in the ledger and planning the request, the send itself, the
// reconciliation against our records and the provider's, delivery status
// lookups and settling the event.
//
// This is the one place where provider answers become Temporal errors. Each
// outcome class has an error type below; the workflow's retry policy is
// written against those names and nothing else.
package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/acme/smsorch/internal/tracing"
	"github.com/acme/smsorch/keys"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/metrics/name"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/reconcile"
	"github.com/acme/smsorch/sms"
)

// Error types of the send activity, one per outcome class that fails an
// attempt. Retry policies name these. The retried outcomes of an attempt
// (not executed, in progress, unknown, rate limited) carry the SDK's
// benign category: they are expected, and show in neither failure
// metrics nor error logs.
const (
	// ErrNotExecuted: the provider says the attempt did not run; retried.
	ErrNotExecuted = "SmsNotExecuted"
	// ErrInProgress: a request with the key is still running; retried after
	// Policy.InProgressDelay.
	ErrInProgress = "SmsInProgress"
	// ErrUnknownOutcome: no usable answer; retried with the same key and bytes.
	ErrUnknownOutcome = "SmsUnknownOutcome"
	// ErrRateLimited: not processed; retried after Retry-After.
	ErrRateLimited = "SmsRateLimited"
	// ErrRejected: the request is wrong; never retried.
	ErrRejected = "SmsRejected"
	// ErrKeyConflict: the key belongs to another request; never retried.
	ErrKeyConflict = "SmsKeyConflict"
	// ErrWindowClosed: the key's replay window (minus margin) has passed,
	// so another attempt could send again; never retried — reconcile.
	ErrWindowClosed = "SmsReplayWindowClosed"
	// ErrInvalidRequest: the event cannot be sent as given; never retried.
	ErrInvalidRequest = "SmsInvalidRequest"
	// ErrFenced: a later run holds the event in the ledger; this run's
	// attempt must not send. Never retried.
	ErrFenced = "SmsFenced"
	// ErrWrongLedger: this worker's ledger is not the one that claimed
	// the event; retried, so a worker with the right ledger takes it.
	ErrWrongLedger = "SmsWrongLedger"
	// ErrNotFinal: the message's delivery status is not final yet (Status
	// with UntilFinal); retried on the tracking schedule. It is expected,
	// so it carries the benign category: no failure in metrics or logs.
	ErrNotFinal = "SmsStatusNotFinal"
)

// NonRetryable lists the error types no retry can fix.
var NonRetryable = []string{ErrRejected, ErrKeyConflict, ErrWindowClosed, ErrInvalidRequest, ErrFenced}

// checkLedger refuses to work on an event against another ledger than
// the one that claimed it (want, recorded by the run; empty for runs that
// started before ledgers had identities). The error is retryable: on a
// fleet where some workers have the right ledger, one of them takes the
// next attempt, and nothing is split between two ledgers meanwhile.
func (a *Activities) checkLedger(want string) error {
	if want == "" || want == a.Ledger.Identity() {
		return nil
	}
	a.log().Warn("refused an activity of an event that another ledger claimed; every worker on the task queue must share one ledger",
		zap.String("ledger", a.Ledger.Describe()), zap.String("identity", a.Ledger.Identity()), zap.String("claimedBy", want))
	return temporal.NewApplicationErrorWithOptions(fmt.Sprintf(
		"this worker's ledger (%s, identity %s) is not the ledger that claimed the event (identity %s): every worker on the task queue must share one ledger; the activity is retried until a worker with that ledger runs it",
		a.Ledger.Describe(), a.Ledger.Identity(), want), ErrWrongLedger,
		temporal.ApplicationErrorOptions{NextRetryDelay: WrongLedgerRetry})
}

// WrongLedgerRetry is the wait before an activity refused for the wrong
// ledger is tried again: not a growing backoff, since the next attempt
// may land on a worker with the right ledger at once.
const WrongLedgerRetry = 2 * time.Second

// Activities holds what the activities need. Workflows reference its
// methods through a nil *Activities; the worker registers a filled one.
type Activities struct {
	// Providers are the configured clients, by name.
	Providers map[provider.Name]provider.Client
	// Policies are the per-provider durations; a missing one is DefaultPolicy.
	Policies map[provider.Name]Policy
	Ledger   ledger.Ledger
	// Now is the clock; default time.Now.
	Now    func() time.Time
	Logger *zap.Logger
}

func (a *Activities) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

func (a *Activities) log() *zap.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return zap.NewNop()
}

// policy returns the policy for a provider.
func (a *Activities) policy(p provider.Name) Policy {
	return a.Policies[p].WithDefaults()
}

// client returns the configured client. A provider this worker has no
// configuration for is a deployment problem that a restart with the right
// settings fixes, so the error is retryable: nothing is lost meanwhile.
func (a *Activities) client(name string) (provider.Client, error) {
	p, err := provider.ParseName(name)
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(err.Error(), ErrInvalidRequest, nil)
	}
	c, ok := a.Providers[p]
	if !ok {
		return nil, fmt.Errorf("this worker has no %s client configured: start the worker with %s settings (the run waits and retries)", p, p)
	}
	return c, nil
}

func invalid(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), ErrInvalidRequest, nil)
}

// PrepareInput is the event as the workflow received it.
type PrepareInput struct {
	Key, Provider, To, From, Text string
	// Fallback is checked like Provider (runs since version 5).
	Fallback string `json:",omitempty"`
}

// SendKey is one Idempotency-Key an event used, and when it was first tried.
type SendKey struct {
	Key            string    `json:"key"`
	FirstAttemptAt time.Time `json:"firstAttemptAt"`
}

// SentMessage is a message id a provider gave an attempt of the event,
// and the key the attempt used (which names its provider, keys.Via).
type SentMessage struct {
	Key string `json:"key"`
	ID  string `json:"id"`
}

// sentMessages lists the message ids of the attempts, oldest first, once
// each.
func sentMessages(attempts []ledger.Attempt) []SentMessage {
	var out []SentMessage
	seen := map[string]bool{}
	for _, at := range attempts {
		if at.MessageID != "" && !seen[at.MessageID] {
			seen[at.MessageID] = true
			out = append(out, SentMessage{Key: at.SendKey, ID: at.MessageID})
		}
	}
	return out
}

// PrepareOutput is the planned request and what the ledger knows.
type PrepareOutput struct {
	// Request is the planned request: its Body bytes go out on every attempt.
	Request provider.Request `json:"request"`
	Policy  Policy           `json:"policy"`
	// Created is true when this run registered the event in the ledger.
	Created bool `json:"created"`
	// Settled is the ledger's record when the event was already settled:
	// nothing must be sent.
	Settled *ledger.Event `json:"settled,omitempty"`
	// FirstAttemptAt is when an earlier run first tried the event key; the
	// replay window counts from it.
	FirstAttemptAt time.Time `json:"firstAttemptAt"`
	// Conflict is set when the key is claimed by a different message.
	Conflict string `json:"conflict,omitempty"`
	// SendKeys are every Idempotency-Key the event used before this run,
	// resend keys included, in the order they were first tried: a run
	// that resumes the event carries on from the last and reconciles all.
	SendKeys []SendKey `json:"sendKeys,omitempty"`
	// LastUncertainAt is the start of the latest attempt of the event, in
	// any run and under any key, that ended without a certain answer or
	// never ended: it may still take effect until the policy's
	// LateEffectHorizon has passed. Zero when there is none.
	LastUncertainAt time.Time `json:"lastUncertainAt"`
	// Messages are the message ids the event's attempts got before this
	// run, in any run: a run that resumes the event knows them (runs
	// since workflow version 7).
	Messages []SentMessage `json:"messages,omitempty"`
	// Warnings about the key or the recipient, for the run's timeline.
	Warnings []string `json:"warnings,omitempty"`
	// LedgerID is the identity of the ledger that claimed the event: the
	// run passes it to every later activity, which refuses another ledger.
	LedgerID string `json:"ledgerId,omitempty"`
}

// Prepare validates the event, plans the request bytes once and claims the
// key in the ledger. Invalid input fails without retry and nothing is sent.
func (a *Activities) Prepare(ctx context.Context, in PrepareInput) (PrepareOutput, error) {
	var out PrepareOutput
	key, err := keys.ParseEvent(in.Key)
	if err != nil {
		return out, invalid(err)
	}
	c, err := a.client(in.Provider)
	if err != nil {
		return out, err
	}
	checked, err := sms.Check(sms.Event{Key: key, Provider: in.Provider, To: in.To, From: in.From, Text: in.Text, Fallback: in.Fallback}, a.now())
	if err != nil {
		return out, invalid(err)
	}
	to := checked.To
	out.Warnings = checked.Warnings
	req, err := c.Plan(string(key), to.E164, in.From, in.Text)
	if err != nil {
		return out, invalid(err)
	}
	out.Request, out.Policy = req, a.policy(c.Name())

	info := activity.GetInfo(ctx)
	// The ledger's clock, as for attempts: on a shared ledger no worker's
	// own clock stands in the record.
	now, err := a.Ledger.Now(ctx)
	if err != nil {
		return out, err // the ledger is down: retry, nothing was sent
	}
	claim, err := a.Ledger.Claim(ctx, ledger.Event{
		Key: string(key), Provider: string(c.Name()), Recipient: to.E164, Sender: req.From, Text: in.Text,
		Fingerprint: req.Fingerprint(), WorkflowID: info.WorkflowExecution.ID, RunID: info.WorkflowExecution.RunID,
		CreatedAt: now,
	})
	var conflict *ledger.ConflictError
	switch {
	case errors.As(err, &conflict) && conflict.Stored != "":
		out.Conflict = fmt.Sprintf("the key %s is claimed in the ledger with other request bytes (stored %s, now %s): the same message now plans into other bytes, which the provider would refuse or take as another message; nothing was sent. Finish the event with the worker version that claimed it, or settle it by hand", key, conflict.Stored, conflict.Given)
		return out, nil
	case errors.As(err, &conflict):
		out.Conflict = fmt.Sprintf("the key %s is already claimed in the ledger by a message with another %s; nothing was sent. This is a different message: derive its own key from its event", key, conflict.Field)
		return out, nil
	case err != nil:
		return out, err // the ledger is down: retry, nothing was sent
	}
	out.Created, out.LedgerID = claim.Created, a.Ledger.Identity()
	out.FirstAttemptAt = claim.Event.FirstAttemptAt
	if claim.Created {
		return out, nil
	}
	attempts, err := a.Ledger.Attempts(ctx, string(key))
	if err != nil {
		return out, err // retried: the run must know every key before it goes on
	}
	out.Messages, out.SendKeys = sentMessages(attempts), sendKeys(attempts)
	if claim.Event.Settled() {
		// Nothing more is sent; the run reports every key and message
		// there was.
		e := claim.Event
		out.Settled = &e
		return out, nil
	}
	out.LastUncertainAt = lastUncertain(attempts, func(ledger.Attempt) bool { return true })
	return out, nil
}

// sendKeys lists the keys of the attempts in the order first tried.
func sendKeys(attempts []ledger.Attempt) []SendKey {
	var out []SendKey
	seen := map[string]bool{}
	for _, at := range attempts { // oldest first
		if !seen[at.SendKey] {
			seen[at.SendKey] = true
			out = append(out, SendKey{Key: at.SendKey, FirstAttemptAt: at.StartedAt})
		}
	}
	return out
}

// lastUncertain returns the start of the latest uncertain attempt among
// those selected, or zero.
func lastUncertain(attempts []ledger.Attempt, selected func(ledger.Attempt) bool) time.Time {
	var last time.Time
	for _, at := range attempts {
		if selected(at) && at.Uncertain() && at.StartedAt.After(last) {
			last = at.StartedAt
		}
	}
	return last
}

// RecallInput asks what the ledger holds of an event and one of its keys.
type RecallInput struct {
	EventKey string `json:"eventKey"`
	SendKey  string `json:"sendKey"`
	// LedgerID is the ledger that claimed the event (PrepareOutput).
	LedgerID string `json:"ledgerId,omitempty"`
}

// RecallOutput is the ledger's record of the event's attempts.
type RecallOutput struct {
	// FirstAttemptAt is when the first attempt under SendKey began, on
	// the ledger's clock: the provider's replay window for the key counts
	// from it. Zero when no attempt under SendKey was ever begun, so
	// nothing can have reached the provider under it.
	FirstAttemptAt time.Time `json:"firstAttemptAt"`
	// Attempts counts the attempts begun under SendKey, in every run.
	Attempts int `json:"attempts"`
	// LastUncertainAt is the start of the latest attempt of the event,
	// under any key and in any run, that ended without a certain answer
	// or never ended; zero when there is none.
	LastUncertainAt time.Time `json:"lastUncertainAt"`
	// SendKeys are every key the event used, in any run, in the order
	// first tried: a run learns those another run of its workflow used.
	SendKeys []SendKey `json:"sendKeys,omitempty"`
	// Messages are the message ids the event's attempts got, in any run.
	Messages []SentMessage `json:"messages,omitempty"`
	// Uncertain counts the event's attempts, under any key and in any
	// run, that ended without a certain answer (not an in-progress one)
	// or never ended: each may have sent a message.
	Uncertain int `json:"uncertain,omitempty"`
}

// Recall reads the event's attempts from the ledger: a run asks after a
// send that ended without an answer that settles it, since the ledger,
// not the activity's end, says whether an attempt began (a send that
// never left the task queue made none) and whether one may still take
// effect.
func (a *Activities) Recall(ctx context.Context, in RecallInput) (RecallOutput, error) {
	var out RecallOutput
	if err := a.checkLedger(in.LedgerID); err != nil {
		return out, err
	}
	attempts, err := a.Ledger.Attempts(ctx, in.EventKey)
	if err != nil {
		return out, err
	}
	for _, at := range attempts { // oldest first
		if at.SendKey == in.SendKey {
			if out.Attempts == 0 {
				out.FirstAttemptAt = at.StartedAt
			}
			out.Attempts++
		}
	}
	out.LastUncertainAt = lastUncertain(attempts, func(ledger.Attempt) bool { return true })
	out.SendKeys = sendKeys(attempts)
	out.Messages = sentMessages(attempts)
	for _, at := range attempts {
		// A 409 in progress executed nothing: the attempt it waited for
		// is the one that may have sent.
		if at.Uncertain() && at.Outcome != string(provider.InProgress) {
			out.Uncertain++
		}
	}
	return out, nil
}

// PlanInput asks for the request of a resend, or of the event at
// another provider (Switch set).
type PlanInput struct {
	EventKey, SendKey, Provider, To, From, Text string
	// Switch, when the request moves the event to another provider, is
	// recorded in the ledger once the request is planned (At is the run's
	// clock).
	Switch *ledger.Switch `json:",omitempty"`
	// LedgerID is the ledger that claimed the event (with Switch).
	LedgerID string `json:",omitempty"`
}

// Plan serialises a resend's request once, under its own key, and
// records a switch of provider in the ledger.
func (a *Activities) Plan(ctx context.Context, in PlanInput) (provider.Request, error) {
	if _, err := keys.Parse(in.SendKey); err != nil {
		return provider.Request{}, invalid(err)
	}
	c, err := a.client(in.Provider)
	if err != nil {
		return provider.Request{}, err
	}
	req, err := c.Plan(in.SendKey, in.To, in.From, in.Text)
	if err != nil {
		return provider.Request{}, invalid(err)
	}
	if in.Switch != nil {
		if err := a.checkLedger(in.LedgerID); err != nil {
			return provider.Request{}, err
		}
		if err := a.Ledger.RecordSwitch(ctx, *in.Switch); err != nil {
			return provider.Request{}, err // the ledger is down: retried
		}
	}
	return req, nil
}

// MoveOutput is the request of the event at another provider, and that
// provider's policy: its replay window, retries and delays govern the
// sends there.
type MoveOutput struct {
	Request provider.Request `json:"request"`
	Policy  Policy           `json:"policy"`
}

// PlanMove plans the event's request at another provider (Plan, which
// records in.Switch), and returns that provider's policy with it.
func (a *Activities) PlanMove(ctx context.Context, in PlanInput) (MoveOutput, error) {
	req, err := a.Plan(ctx, in)
	if err != nil {
		return MoveOutput{}, err
	}
	return MoveOutput{Request: req, Policy: a.policy(req.Provider)}, nil
}

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
	// in an earlier activity (the last attempt after the retries, and
	// since version 6 any later Send of the key): a new activity after
	// the retries' one: its ledger rows are numbered after theirs, so it
	// never overwrites the record of an earlier attempt of the run.
	AfterRetries bool `json:"afterRetries,omitempty"`
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
func (a *Activities) Send(ctx context.Context, in SendInput) (SendOutput, error) {
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
	// The ledger's clock: the window counts from the first attempt as the
	// ledger recorded it, whichever worker made it.
	now, err := a.Ledger.Now(ctx)
	if err != nil {
		return SendOutput{}, err
	}
	first, tried, err := a.Ledger.FirstAttempt(ctx, req.Key)
	if err != nil {
		return SendOutput{}, err
	}
	if tried && now.After(first.Add(in.Budget)) {
		return SendOutput{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("the replay window of %s closed: first attempt %s, budget %s; another attempt could send a second SMS, so the run reconciles instead",
				req.Key, first.UTC().Format(time.RFC3339), in.Budget), ErrWindowClosed, nil)
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
	// An attempt needs the time a provider may take to answer. One that
	// the activity's deadline (the end of the retries' share of the
	// window) would cut short ends with its outcome unknown where the
	// provider might have answered, turning a certain history into an
	// uncertain one. It is not made: nothing is sent, and the run's last
	// attempt before the window closes gets its full time.
	if deadline, ok := ctx.Deadline(); ok {
		// The run's attempt time, which its start-to-close holds with the
		// slack, capped by the client's own timeout on this worker.
		need := a.policy(req.Provider).AttemptTimeout
		if run := info.StartToCloseTimeout - AttemptSlack; run > 0 {
			need = min(need, run)
		}
		if left := deadline.Sub(begun); left < need {
			reason := fmt.Sprintf("no attempt made: the activity started with %s left before its deadline, less than the %s an answer may take; nothing was sent",
				left.Round(time.Millisecond), need)
			// The person reading the run's timeline wants the provider's
			// last answer, not this.
			if last := a.lastAnswer(ctx, in.EventKey, req.Key); last != "" {
				reason = last + " (the last answer; then " + reason + ")"
			} else {
				reason = string(req.Provider) + ": " + reason
			}
			tracing.Annotate(ctx, tracing.Outcome.String(string(provider.NotExecuted)))
			return SendOutput{}, temporal.NewApplicationErrorWithOptions(reason, ErrNotExecuted, temporal.ApplicationErrorOptions{
				Details:  []any{SendFailure{Result: provider.Result{Outcome: provider.NotExecuted, Reason: reason}, Attempt: info.Attempt - 1}},
				Category: temporal.ApplicationErrorCategoryBenign,
			})
		}
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

	row.EndedAt, row.Outcome, row.HTTPStatus, row.Code = a.now(), string(res.Outcome), res.HTTPStatus, res.Code
	row.MessageID, row.Replay, row.Reason = res.MessageID, res.Outcome == provider.Replayed, res.Reason
	log := a.log().With(zap.String("key", req.Key), zap.String("provider", string(req.Provider)),
		zap.String("to", sms.MaskPhone(req.To)), zap.Int32("attempt", info.Attempt), tracing.LogTraceID(ctx))
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

	if res.Outcome.Sent() {
		// Earlier runs count too: a run that resumed the event starts
		// again at activity attempt 1.
		out := SendOutput{Result: res, Attempt: info.Attempt}
		out.UncertainSince = a.earlierUncertain(ctx, in.EventKey, row)
		out.Uncertain = !out.UncertainSince.IsZero()
		return out, nil
	}
	return SendOutput{}, AttemptError(res, info.Attempt, in.InProgressDelay)
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

// ReconcileInput asks what the ledger and the provider know about an
// event's keys.
type ReconcileInput struct {
	EventKey string   `json:"eventKey"`
	Provider string   `json:"provider"`
	Keys     []string `json:"keys"`
	// KnownIDs are message ids the workflow already has.
	KnownIDs []string `json:"knownIds,omitempty"`
	// Since is the first attempt under any of Keys; the provider's list is
	// searched from shortly before it.
	Since time.Time `json:"since"`
	// LedgerID is the ledger that claimed the event (PrepareOutput).
	LedgerID string `json:"ledgerId,omitempty"`
}

// ReconcileOutput is what was found.
type ReconcileOutput struct {
	// Messages are the provider's records of the event's messages.
	Messages []provider.Message `json:"messages,omitempty"`
	// Searched is true when the provider's records could be searched for
	// the keys (a list, or at least one message id to look up).
	Searched bool `json:"searched"`
	// How says what was consulted, for the timeline.
	How string `json:"how"`
	// ByKey is true when the provider's records were searched by key (a
	// list endpoint), so a message no attempt of ours answered with can
	// be found; false when only known ids could be looked up (Sendy).
	ByKey bool `json:"byKey"`
	// LastUncertainAt is the start of the latest attempt under the keys
	// that ended without a certain answer or never ended; zero if none.
	LastUncertainAt time.Time `json:"lastUncertainAt"`
	// Unsearchable are the keys the provider's records cannot speak for,
	// with how many of their attempts may have sent a message.
	Unsearchable []reconcile.Unsearchable `json:"unsearchable,omitempty"`
	// NotExecutedOnly is true when the ledger holds attempts under the
	// keys and every one of them ended with an answer that says it was
	// not executed (not executed, rate limited), with no message id: the
	// proof that the provider sent nothing, from the ledger alone.
	NotExecutedOnly bool `json:"notExecutedOnly,omitempty"`
	// NotSent is true when no attempt under the keys can have sent a
	// message: every one was answered without being executed, rate
	// limited or rejected, with no message id, or none was ever begun
	// (a send that never left the task queue). Nothing can be found then,
	// so a resend needs no search that speaks for the keys.
	NotSent bool `json:"notSent,omitempty"`
	// Vanished are message ids of ours (the ledger's or the run's) that
	// the provider answers "not found" for: each was a message the
	// provider accepted, so whether it went out is unknown, never proof
	// that nothing was sent.
	Vanished []string `json:"vanished,omitempty"`
}

// notSent reports whether no attempt under the wanted keys can have sent
// a message: each was answered without being executed, or rejected.
func notSent(attempts []ledger.Attempt, want map[string]bool) bool {
	for _, at := range attempts {
		if want[at.SendKey] && !unexecuted(at, true) {
			return false
		}
	}
	return true
}

// unexecuted reports an attempt whose answer says it sent nothing: not
// executed or rate limited, or, with rejected, refused. A 409 rejection
// says the key is bound to another request, which the provider may have
// sent, so it never counts.
func unexecuted(at ledger.Attempt, rejected bool) bool {
	if at.Open() || at.MessageID != "" {
		return false
	}
	switch provider.Outcome(at.Outcome) {
	case provider.NotExecuted, provider.RateLimited:
		return true
	case provider.Rejected:
		return rejected && at.HTTPStatus != http.StatusConflict
	}
	return false
}

// notExecutedOnly reports whether every attempt under the wanted keys
// ended certainly unexecuted, and there was at least one.
func notExecutedOnly(attempts []ledger.Attempt, want map[string]bool) bool {
	n := 0
	for _, at := range attempts {
		if !want[at.SendKey] {
			continue
		}
		n++
		if !unexecuted(at, false) {
			return false
		}
	}
	return n > 0
}

// Reconcile looks for the event's messages in our ledger and in the
// provider's records (reconcile.Search).
func (a *Activities) Reconcile(ctx context.Context, in ReconcileInput) (ReconcileOutput, error) {
	c, err := a.client(in.Provider)
	if err != nil {
		return ReconcileOutput{}, err
	}
	if err := a.checkLedger(in.LedgerID); err != nil {
		return ReconcileOutput{}, err
	}
	// The search window ends at the ledger's clock, which the attempts'
	// times were taken from.
	now, err := a.Ledger.Now(ctx)
	if err != nil {
		return ReconcileOutput{}, err
	}
	found, err := reconcile.Search(ctx, a.Ledger, c, reconcile.Query{
		EventKey: in.EventKey, Keys: in.Keys, KnownIDs: in.KnownIDs, Since: in.Since, Now: now,
	})
	result := "none"
	switch {
	case err != nil:
		result = "failed"
	case len(found.Messages) > 0:
		result = "found"
	case !found.Searched:
		result = "unsearchable"
	}
	activity.GetMetricsHandler(ctx).WithTags(map[string]string{"provider": in.Provider, "result": result}).Counter(name.Reconciliations).Inc(1)
	tracing.Annotate(ctx, tracing.EventKey.String(in.EventKey), tracing.Provider.String(in.Provider), tracing.Outcome.String(result))
	if err != nil {
		return ReconcileOutput{}, err
	}
	want := map[string]bool{}
	for _, k := range in.Keys {
		want[k] = true
	}
	for i := range found.Messages {
		found.Messages[i] = lean(found.Messages[i])
	}
	return ReconcileOutput{
		Messages: found.Messages, Searched: found.Searched, How: found.How, ByKey: found.ByKey, Unsearchable: found.Unsearchable,
		LastUncertainAt: lastUncertain(found.Attempts, func(at ledger.Attempt) bool { return want[at.SendKey] }),
		NotExecutedOnly: notExecutedOnly(found.Attempts, want),
		NotSent:         notSent(found.Attempts, want),
		Vanished:        found.Vanished,
	}, nil
}

// StatusInput names the message to look up.
type StatusInput struct {
	Provider, MessageID string
	// UntilFinal makes a status that is not final yet an ErrNotFinal
	// failure, so the activity's retry policy is the polling schedule:
	// one activity and no workflow task for every lookup until the
	// status is final.
	UntilFinal bool `json:"untilFinal,omitempty"`
}

// Status returns the provider's current record of a message.
func (a *Activities) Status(ctx context.Context, in StatusInput) (provider.Message, error) {
	c, err := a.client(in.Provider)
	if err != nil {
		return provider.Message{}, err
	}
	m, err := c.Get(ctx, in.MessageID)
	if err == nil {
		tracing.Annotate(ctx, tracing.Provider.String(in.Provider), tracing.Outcome.String(string(m.Status)))
	}
	if err == nil && in.UntilFinal && !m.Status.Final() {
		return provider.Message{}, temporal.NewApplicationErrorWithOptions(
			fmt.Sprintf("message %s is %s, not final yet: looking again on the tracking schedule", in.MessageID, m.Status),
			ErrNotFinal, temporal.ApplicationErrorOptions{Category: temporal.ApplicationErrorCategoryBenign, Details: []any{lean(m)}})
	}
	return lean(m), err
}

// lean drops what a run does not need from a provider's record: the
// recipient and the text stay out of the run's history.
func lean(m provider.Message) provider.Message {
	m.To, m.Text = "", ""
	return m
}

// SettleInput is the event's final outcome.
type SettleInput struct {
	Key, Outcome, Reason, MessageID string
	// LedgerID is the ledger that claimed the event (PrepareOutput).
	LedgerID string `json:"ledgerId,omitempty"`
	// KnownKeys, when CheckKeys is set, are the keys the run knows the
	// event by: a key with attempts in the ledger that is not among them
	// (another run of the workflow used it, as before a Temporal reset)
	// stops the settle, and the run searches it first.
	KnownKeys []string `json:"knownKeys,omitempty"`
	CheckKeys bool     `json:"checkKeys,omitempty"`
	// MessageIDs and Findings are every message of the event the run
	// knows and what it reports beside the outcome (ledger.Finding…),
	// kept with the event for a run that finds it settled (runs since
	// workflow version 7).
	MessageIDs []string `json:"messageIds,omitempty"`
	Findings   []string `json:"findings,omitempty"`
}

// SettleOutput is the outcome the ledger holds after the settle: the
// first settle of an event wins unless a later one ranks higher
// (ledger.Rank), so it may be another run's.
type SettleOutput struct {
	Outcome   string    `json:"outcome"`
	Reason    string    `json:"reason"`
	MessageID string    `json:"messageId,omitempty"`
	SettledAt time.Time `json:"settledAt"`
	// UnknownKeys, when not empty, are the keys the ledger holds attempts
	// under that the run did not know: nothing was settled.
	UnknownKeys []SendKey `json:"unknownKeys,omitempty"`
	// LastUncertainAt is the start of the latest uncertain attempt of the
	// event, with UnknownKeys.
	LastUncertainAt time.Time `json:"lastUncertainAt"`
	// MessageIDs and Findings are what every run that settled the event
	// recorded (with SettleInput's).
	MessageIDs []string `json:"messageIds,omitempty"`
	Findings   []string `json:"findings,omitempty"`
}

// Settle records the final outcome in the ledger, so the event is never
// sent again, even after Temporal has forgotten the run. A ledger that
// cannot be written is an error the workflow retries: a run never ends
// as if its outcome were recorded when it was not.
func (a *Activities) Settle(ctx context.Context, in SettleInput) (SettleOutput, error) {
	if err := a.checkLedger(in.LedgerID); err != nil {
		return SettleOutput{}, err
	}
	if in.CheckKeys {
		attempts, err := a.Ledger.Attempts(ctx, in.Key)
		if err != nil {
			return SettleOutput{}, err
		}
		known := map[string]bool{}
		for _, k := range in.KnownKeys {
			known[k] = true
		}
		var out SettleOutput
		for _, k := range sendKeys(attempts) {
			if !known[k.Key] {
				out.UnknownKeys = append(out.UnknownKeys, k)
			}
		}
		if len(out.UnknownKeys) > 0 {
			out.LastUncertainAt = lastUncertain(attempts, func(ledger.Attempt) bool { return true })
			return out, nil
		}
	}
	now, err := a.Ledger.Now(ctx)
	if err != nil {
		return SettleOutput{}, err
	}
	e, err := a.Ledger.Settle(ctx, in.Key, in.Outcome, in.Reason, in.MessageID, now)
	if err != nil {
		return SettleOutput{}, err
	}
	if len(in.Findings) > 0 || slices.ContainsFunc(in.MessageIDs, func(id string) bool { return id != in.MessageID }) {
		// Only what the settle's own row does not say: a run with one
		// message and nothing to report (most of them) writes once.
		// Retried with the rest when it fails: the settle itself is
		// written, and writing it again changes nothing.
		if e, err = a.Ledger.Record(ctx, in.Key, in.MessageIDs, in.Findings); err != nil {
			return SettleOutput{}, err
		}
	}
	return SettleOutput{Outcome: e.Outcome, Reason: e.Reason, MessageID: e.MessageID, SettledAt: e.SettledAt, MessageIDs: e.MessageIDs, Findings: e.Findings}, nil
}
