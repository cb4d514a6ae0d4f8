package activities

// Status: the provider's record of a message.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/acme/smsorch/internal/tracing"
	"github.com/acme/smsorch/provider"
)

// StatusInput names the message to look up.
type StatusInput struct {
	Provider, MessageID string
	// UntilFinal makes a status that is not final yet an ErrNotFinal
	// failure, so the activity's retry policy is the polling schedule:
	// one activity and no workflow task for every lookup until the
	// status is final.
	UntilFinal bool `json:"untilFinal,omitempty"`
	// FirstWait, with UntilFinal, is the wait before the first lookup:
	// the activity's first attempt asks the provider nothing and fails
	// ErrNotFinal with this as its retry delay, so the run schedules the
	// lookups in the workflow task that recorded the acceptance, with no
	// timer and no workflow task for the wait.
	FirstWait time.Duration `json:"firstWait,omitempty"`
}

// Status returns the provider's current record of a message.
func (a *Activities) Status(ctx context.Context, in StatusInput) (provider.Message, error) {
	c, err := a.client(in.Provider)
	if err != nil {
		return provider.Message{}, err
	}
	if err := FirstWait(ctx, in); err != nil {
		return provider.Message{}, err
	}
	m, err := c.Get(ctx, in.MessageID)
	var held *provider.NotSentError
	if errors.As(err, &held) {
		// The fleet's limit left no slot in time: nothing was asked, and
		// the next try waits for the slot the pacer named.
		return provider.Message{}, temporal.NewApplicationErrorWithOptions(err.Error(), ErrNotExecuted,
			temporal.ApplicationErrorOptions{Category: temporal.ApplicationErrorCategoryBenign, NextRetryDelay: held.RetryAfter})
	}
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

// FirstWait is the first attempt of a lookup that waits first
// (StatusInput.FirstWait): an ErrNotFinal whose retry delay is the wait,
// and nil for every other attempt and lookup. Status calls it before it
// asks the provider; a test's stand-in for Status calls it too.
func FirstWait(ctx context.Context, in StatusInput) error {
	if !in.UntilFinal || in.FirstWait <= 0 || activity.GetInfo(ctx).Attempt != 1 {
		return nil
	}
	return temporal.NewApplicationErrorWithOptions(
		fmt.Sprintf("message %s: first lookup in %s, on the tracking schedule", in.MessageID, in.FirstWait),
		ErrNotFinal, temporal.ApplicationErrorOptions{Category: temporal.ApplicationErrorCategoryBenign, NextRetryDelay: in.FirstWait})
}
