package activities

// Recall: what the ledger holds of an event and one of its keys.

import (
	"context"
	"time"

	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
)

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
