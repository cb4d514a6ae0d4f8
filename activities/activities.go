// Package activities holds the send workflow's activities: claiming the
// event in the ledger and planning the request, the send itself, the
// reconciliation against our records and the provider's, delivery status
// lookups and settling the event, one activity to a file: prepare.go,
// recall.go, plan.go, send.go (with its first status lookup,
// firstlook.go), reconcile.go, status.go, settle.go; the retry policies
// are in policy.go.
//
// This is the one place where provider answers become Temporal errors. Each
// outcome class has an error type below; the workflow's retry policy is
// written against those names and nothing else.
package activities

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
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
	Now func() time.Time
	// Sleep waits d or until ctx ends (a Send's FirstLook); default a
	// timer.
	Sleep  func(ctx context.Context, d time.Duration) error
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
