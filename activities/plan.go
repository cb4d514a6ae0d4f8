package activities

// Plan and PlanMove: the request bytes of a send, made once.

import (
	"context"

	"github.com/acme/smsorch/keys"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
)

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
