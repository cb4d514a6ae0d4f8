package activities

// Prepare: the event claimed in the ledger, the keys an earlier run used.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/acme/smsorch/keys"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/sms"
)

// PrepareInput is the event as the workflow received it.
type PrepareInput struct {
	Key, Provider, To, From, Text string
	// Fallback is checked like Provider.
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
	// run, in any run: a run that resumes the event knows them.
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
