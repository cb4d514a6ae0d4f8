package workflows

import (
	"errors"
	"slices"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/acme/smsorch/activities"
)

// retryable reports whether err leaves room for another try: not an
// application error marked non-retryable or of one of the given types.
func retryable(err error, nonRetryable []string) bool {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return !appErr.NonRetryable() && !slices.Contains(nonRetryable, appErr.Type())
	}
	return true
}

// windowRanOut reports whether the send's schedule-to-close budget ended
// it: as a timeout, or because the next retry would have passed it (the
// server then returns the last failure). A retryable outcome class can only
// reach the workflow that way, since the attempt cap never binds first; the
// SDK's test environment leaves the retry state unset, so the class decides.
func windowRanOut(err error) bool {
	var timeout *temporal.TimeoutError
	var actErr *temporal.ActivityError
	var appErr *temporal.ApplicationError
	if errors.As(err, &timeout) || (errors.As(err, &actErr) && actErr.RetryState() == enumspb.RETRY_STATE_TIMEOUT) {
		return true
	}
	if errors.As(err, &appErr) {
		switch appErr.Type() {
		case activities.ErrUnknownOutcome, activities.ErrNotExecuted, activities.ErrInProgress, activities.ErrRateLimited:
			return true
		}
	}
	return false
}

// notFinalYet reports a lookUntilFinal that ran out of its budget with
// the status still not final: expected, not worth a line in the
// timeline. A budget that ran out on another failure (the message is
// not found, the credentials are refused) is not.
func notFinalYet(err error) bool {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type() == activities.ErrNotFinal
	}
	var timeout *temporal.TimeoutError
	return errors.As(err, &timeout) && timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE
}

// errorMessage is the innermost message of an activity error, which is the
// one that says what happened.
func errorMessage(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Message()
	}
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		return "timed out (" + timeout.TimeoutType().String() + ")"
	}
	// An activity error with no application error inside (a local
	// activity's plain error, as the SDK's test environment returns it):
	// its own message, without the wrapper's ids.
	var actErr *temporal.ActivityError
	if errors.As(err, &actErr) && errors.Unwrap(actErr) != nil {
		return errors.Unwrap(actErr).Error()
	}
	return err.Error()
}
