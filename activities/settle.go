package activities

// Settle: the event's outcome written to the ledger.

import (
	"context"
	"slices"
	"time"

	"github.com/acme/smsorch/ledger"
)

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
	// kept with the event for a run that finds it settled.
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
