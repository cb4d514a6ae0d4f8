package activities

// Status: the provider's record of a message.

import (
	"context"
	"fmt"

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
