// Package contract is the contract of the send workflow: names and types
// that the worker, the starter, the CLI, the HTTP intake and people typing
// into the Temporal UI or CLI all share.
package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"

	"github.com/acme/smsorch/keys"
)

const (
	// TaskQueue is where the send workflow and its activities run.
	TaskQueue = "sms"
	// WorkflowName is the registered name of SendSMS.
	WorkflowName = "SendSMS"
	// SignalResend and SignalCancel carry a person's decision for a run
	// awaiting one. Payload: {"reason": "...", "by": "..."}; a resend may
	// add "force": true to send even where no reconciliation succeeded.
	SignalResend = "resend"
	SignalCancel = "cancel"
	// UpdateDecide is the same decision as an update, with a synchronous
	// answer: a decision that does not fit the state is refused at once.
	UpdateDecide = "decide"
	// QueryState returns the run's Status.
	QueryState = "state"
	// FailureType is the ApplicationError type of a run that ends Failed.
	FailureType = "SmsFailed"
)

// ProviderQueue is the one task queue of a provider's activities,
// beside the run's own task queue: "sms-sendy" for runs on "sms". Every
// worker polls it with the same fleet-wide rate limit (worker option
// TaskQueueActivitiesPerSecond, enforced by the server for all pollers
// together). Its sends, status lookups and searches share that limit,
// and task priorities order them: a search (PrioritySearch) before a
// send (PrioritySend) before a status lookup (PriorityLookup), so sends
// use what searches leave and lookups what both leave.
func ProviderQueue(runQueue, provider string) string {
	return runQueue + "-" + provider
}

// Task priorities on a provider's queue (PriorityKey: 1 is served first).
const (
	PrioritySearch = 1
	PrioritySend   = 2
	PriorityLookup = 3
)

// WorkflowID is the run's id: the event key itself, so a second start of
// the same event finds the first run.
func WorkflowID(k keys.Key) string { return string(k) }

// Input starts a send. The workflow id must equal Key.
type Input struct {
	Key      string `json:"key"`
	Provider string `json:"provider"`
	// To is the recipient; E.164 preferred.
	To string `json:"to"`
	// From is the sender name (Sendy); empty for Bird or for the default.
	From string `json:"from,omitempty"`
	Text string `json:"text"`
	// Fallback is the provider the run moves to when Provider's records
	// prove that it sent nothing: under its own key,
	// keys.Via(Key, Fallback). Empty: no failover.
	Fallback string `json:"fallback,omitempty"`
}

// State is where a run is in the life of its event.
type State string

// The states. The last five are final.
const (
	Sending          State = "Sending"
	Reconciling      State = "Reconciling"
	Accepted         State = "Accepted"
	AwaitingDecision State = "AwaitingDecision"
	Delivered        State = "Delivered"
	Failed           State = "Failed"
	Cancelled        State = "Cancelled"
	Duplicate        State = "Duplicate"
	// Unconfirmed: the run ended with a message accepted whose delivery
	// it could not confirm (the tracking limit passed, or the message
	// turned up only in the last look before the run settled).
	Unconfirmed State = "Unconfirmed"
)

// States are every state, in the order of the run's life.
var States = []State{Sending, Reconciling, Accepted, AwaitingDecision, Delivered, Unconfirmed, Failed, Cancelled, Duplicate}

// Final reports whether a run in this state has ended. Accepted means
// "sent, tracking delivery": an open run.
func (s State) Final() bool {
	switch s {
	case Delivered, Failed, Cancelled, Duplicate, Unconfirmed:
		return true
	}
	return false
}

// Decision is a person's answer to a run awaiting a decision.
type Decision struct {
	// Action is "resend" or "cancel"; signals imply it from their name.
	Action string `json:"action,omitempty"`
	Reason string `json:"reason"`
	// By names who decided, for the audit trail.
	By string `json:"by"`
	// Force, on a resend, sends even when the provider's records could
	// not be searched (the search failed, or the provider cannot be
	// searched for this event): a blind resend, which may make a second
	// SMS. The timeline and the Result record it as such.
	Force bool `json:"force,omitempty"`
	// Provider, on a resend, sends through this provider instead of the
	// one the run is on ("bird" or "sendy"), after the same search as any
	// resend, under the key of the event at that provider.
	Provider string `json:"provider,omitempty"`
	// Key is the event the decision is for: the run's workflow id. ID
	// names this decision; a run applies each id once. Together they make
	// a decision, sealed or not, useless anywhere but where it was made:
	// a copy taken from one run's history is refused by another run, and
	// by the same run later. A run requires both; Starter.Decide and
	// Starter.Signal fill them in.
	Key string `json:"key,omitempty"`
	ID  string `json:"id,omitempty"`
}

// DecisionForm is the payload of a decision signal for the event key, as
// a person types it in the web UI or the temporal CLI.
func DecisionForm(key string) string {
	return fmt.Sprintf(`{"reason": "...", "by": "...", %s}`, bindingForm(key))
}

// bindingForm is the key and id fields of a decision for key, with a
// placeholder for the id (refused as an id by CheckBinding).
func bindingForm(key string) string {
	return fmt.Sprintf(`"key": %q, "id": "<unique to this decision, e.g. your ticket number>"`, key)
}

// MaxDecisionID is the longest decision id a run accepts.
const MaxDecisionID = 128

// CheckBinding reports a decision that does not name the event key or
// carries no usable id; key is the run's event key.
func (d Decision) CheckBinding(key string) error {
	example := bindingForm(key)
	switch {
	case d.Key == "" || d.ID == "":
		return fmt.Errorf(`a decision names the event it is for and carries an id of its own, so that a copy of it cannot be applied to another run or twice: add %s`, example)
	case d.Key != key:
		return fmt.Errorf(`the decision is for event %q, not for this run's %q: decide on the run of that event, or give %s`, truncate(d.Key, 80), key, example)
	case strings.HasPrefix(d.ID, "<") && strings.HasSuffix(d.ID, ">"):
		return fmt.Errorf(`decision id %q is the form's placeholder: give an id of your own, such as your ticket number`, truncate(d.ID, 80))
	case len(d.ID) > MaxDecisionID || strings.TrimSpace(d.ID) != d.ID || !utf8.ValidString(d.ID):
		return fmt.Errorf(`decision id %q is not usable: give at most %d bytes of UTF-8 without leading or trailing spaces`, truncate(d.ID, 80), MaxDecisionID)
	}
	return nil
}

// Decision actions.
const (
	ActionResend = "resend"
	ActionCancel = "cancel"
)

// Validate reports a decision that cannot be applied in any state.
func (d Decision) Validate() error {
	if d.Action != ActionResend && d.Action != ActionCancel {
		return fmt.Errorf("action %q is not known: use %q or %q", d.Action, ActionResend, ActionCancel)
	}
	if strings.TrimSpace(d.By) == "" || strings.TrimSpace(d.Reason) == "" {
		return errors.New(`a decision needs "by" (who decides) and "reason" (why), for the audit trail: {"reason": "customer confirmed no SMS arrived", "by": "alice"}`)
	}
	if d.Force && d.Action != ActionResend {
		return fmt.Errorf(`"force" applies to a resend only, not to a %s`, d.Action)
	}
	return nil
}

// CheckProvider reports a provider a decision cannot name: one on a
// cancel, or one that is not known.
func (d Decision) CheckProvider() error {
	if d.Provider != "" && d.Action != ActionResend {
		return fmt.Errorf(`"provider" applies to a resend only, not to a %s`, d.Action)
	}
	if d.Provider != "" && d.Provider != "bird" && d.Provider != "sendy" {
		return fmt.Errorf(`provider %q is not known: use "bird" or "sendy"`, d.Provider)
	}
	return nil
}

// ParseSignal reads a signal payload as the Temporal UI's or CLI's signal
// form sends it: the JSON object {"reason": "...", "by": "..."}.
func ParseSignal(action string, raw json.RawMessage) (Decision, error) {
	d := Decision{Action: action}
	if len(raw) == 0 || string(raw) == "null" {
		return d, errors.New(`the signal has no payload: send {"reason": "...", "by": "...", "key": "<the event key>", "id": "<unique to this decision>"}`)
	}
	var body struct {
		Reason   string `json:"reason"`
		By       string `json:"by"`
		Force    bool   `json:"force"`
		Provider string `json:"provider"`
		Key      string `json:"key"`
		ID       string `json:"id"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return d, fmt.Errorf(`the signal payload %s is not {"reason": "...", "by": "..."} with the event's "key" and an "id" (a resend may add "force": true and "provider": "sendy")`, truncate(string(raw), 80))
	}
	d.Reason, d.By, d.Force, d.Provider, d.Key, d.ID = body.Reason, body.By, body.Force, body.Provider, body.Key, body.ID
	return d, d.Validate()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// DecisionAck is the update's answer to an accepted decision.
type DecisionAck struct {
	State   State  `json:"state"`
	Message string `json:"message"`
}

// Result says what happened to the event. A run that ends Failed carries
// it as the details of its ApplicationError, a Cancelled run as the
// details of its CanceledError.
type Result struct {
	Key   string `json:"key"`
	State State  `json:"state"`
	// Reason explains the state in a sentence.
	Reason string `json:"reason"`
	// MessageIDs are the provider's ids of every message found for the
	// event; more than one for one key is a proven duplicate send.
	MessageIDs     []string `json:"messageIds"`
	DeliveryStatus string   `json:"deliveryStatus,omitempty"`
	// Attempts counts HTTP attempts; Replays those the provider answered
	// from its replay store.
	Attempts int `json:"attempts"`
	Replays  int `json:"replays"`
	// KeysUsed are the Idempotency-Keys sent: the event key, then resend keys.
	KeysUsed   []string `json:"keysUsed"`
	ResendKeys []string `json:"resendKeys,omitempty"`
	// DuplicateSend is true when the provider holds several accepted
	// messages for one key.
	DuplicateSend bool `json:"duplicateSend,omitempty"`
	// PossibleDuplicate is true when a second message may exist but the
	// provider cannot be searched to tell: a new message (not a replay)
	// after an attempt without a certain answer, at a provider without a
	// list endpoint (Sendy), or a blind resend.
	PossibleDuplicate bool `json:"possibleDuplicate,omitempty"`
	// BlindResends are the resend keys sent by a forced decision without
	// a reconciliation that succeeded.
	BlindResends []string `json:"blindResends,omitempty"`
	// Resends say, for each resend, who decided it and what it was sent on.
	Resends []Resend `json:"resends,omitempty"`
	// OutcomeUnknown is true when an attempt of the event ended without a
	// certain answer and no search could tell whether it sent a message
	// (the provider cannot be searched for it, or every search failed):
	// whatever the state says, an SMS may have gone out.
	OutcomeUnknown bool `json:"outcomeUnknown,omitempty"`
}

// Resend is one resend decision as it was carried out.
type Resend struct {
	Key string `json:"key"`
	// Provider is where it was sent, when it moved the event to another
	// provider than the one before it.
	Provider string `json:"provider,omitempty"`
	By       string `json:"by"`
	Reason   string `json:"reason"`
	// Basis is what made the resend safe to send: BasisReconciled,
	// BasisDeliveryFailed, or BasisBlind for a forced one.
	Basis string `json:"basis"`
}

// Resend bases.
const (
	// BasisReconciled: past the window, a search of the provider's
	// records that succeeded found no live message of the event.
	BasisReconciled = "reconciled"
	// BasisDeliveryFailed: inside the window, the event's message is
	// known to have failed.
	BasisDeliveryFailed = "delivery-failed"
	// BasisBlind: forced, without a search that succeeded.
	BasisBlind = "blind"
	// BasisNoMessage: a failover, by the run itself, on proof that the
	// provider it left holds no message of the event: every attempt was
	// answered "not executed", or a search past the window found none.
	BasisNoMessage = "no-message"
)

// Entry is one line of a run's timeline: when, what kind of line it is,
// and its text for a person. Tests, smsctl and other tools match the
// kind; the text is prose and may be reworded.
type Entry struct {
	At time.Time `json:"at"`
	// Kind is one of EntryKinds.
	Kind EntryKind `json:"kind"`
	Text string    `json:"text"`
}

// EntryKind says what a timeline entry is about, as a short code beside
// its text. The set is closed: every entry a run adds has one of
// EntryKinds.
type EntryKind string

// The kinds of timeline entries.
const (
	// KindSending: a send under a key begins, or goes on under the same
	// key and bytes (its retries, the last attempt after them, another
	// try while its replay window is open).
	KindSending EntryKind = "sending"
	// KindAccepted: the provider accepted the message, or answered an
	// attempt from its replay store with it.
	KindAccepted EntryKind = "accepted"
	// KindRejected: the provider rejected the request; not retried.
	KindRejected EntryKind = "rejected"
	// KindSendUnknown: a send ended without an answer that settles it
	// (its replay window ran out or had closed): the run reconciles next.
	KindSendUnknown EntryKind = "send-unknown"
	// KindNotSent: no attempt under a key began, so nothing reached the
	// provider, or no attempt can have reached it.
	KindNotSent EntryKind = "not-sent"
	// KindWaiting: the run waits until an attempt without a certain
	// answer can no longer take effect (the late-effect horizon) before
	// it searches.
	KindWaiting EntryKind = "waiting"
	// KindSearching: a search of a provider's records for a message of
	// the event, or a second one, begins, and why.
	KindSearching EntryKind = "searching"
	// KindSearched: a search of a provider's records succeeded; the text
	// says what it covered.
	KindSearched EntryKind = "searched"
	// KindSearchFailed: a search of a provider's records failed.
	KindSearchFailed EntryKind = "search-failed"
	// KindFound: a search found a message of the event (the text gives
	// its status), or one turned up: the run follows a live one, or, once
	// it has ended, says the SMS was sent after all.
	KindFound EntryKind = "found"
	// KindNotFound: a search found no live message of the event: none,
	// or only failed ones.
	KindNotFound EntryKind = "not-found"
	// KindDuplicate: a duplicate send, proven (more than one live
	// message of the event) or possible (one no search can rule out).
	KindDuplicate EntryKind = "duplicate"
	// KindOutcomeUnknown: whether an SMS of the event went out cannot be
	// told.
	KindOutcomeUnknown EntryKind = "outcome-unknown"
	// KindStatus: tracking delivery: a message's status changed, or a
	// status lookup failed.
	KindStatus EntryKind = "status"
	// KindAwaitingDecision: the run waits for a person's decision, until
	// the deadline the text names.
	KindAwaitingDecision EntryKind = "awaiting-decision"
	// KindDecided: a person's decision was taken, or a resend that waited
	// for a search is carried out.
	KindDecided EntryKind = "decided"
	// KindDecisionRefused: a decision (a signal, or a cancellation
	// request) was refused, and why.
	KindDecisionRefused EntryKind = "decision-refused"
	// KindResendHeld: a resend that was decided is not carried out now:
	// it waits for a search that succeeds, cannot be carried out as
	// decided, was replaced by a later decision, or is not needed because
	// a message of the event is alive.
	KindResendHeld EntryKind = "resend-held"
	// KindMoved: the event moves to another provider (a failover or a
	// decision), or why there is no failover.
	KindMoved EntryKind = "moved"
	// KindLedger: what the ledger holds of the event that the run did not
	// know (another run's keys, messages, findings or settle), a takeover
	// from another run of the workflow, a ledger step that fell back to
	// an activity, or a read of the ledger that failed.
	KindLedger EntryKind = "ledger"
	// KindWarning: a warning about the event as given.
	KindWarning EntryKind = "warning"
	// KindEnded: the outcome the run ends with, and why (no decision
	// within the deadline, delivery not confirmed, the event invalid or
	// settled before, a ledger that could not record it).
	KindEnded EntryKind = "ended"
)

// EntryKinds are every kind of timeline entry.
var EntryKinds = []EntryKind{
	KindSending, KindAccepted, KindRejected, KindSendUnknown, KindNotSent,
	KindWaiting, KindSearching, KindSearched, KindSearchFailed, KindFound, KindNotFound,
	KindDuplicate, KindOutcomeUnknown, KindStatus,
	KindAwaitingDecision, KindDecided, KindDecisionRefused, KindResendHeld,
	KindMoved, KindLedger, KindWarning, KindEnded,
}

// Known reports whether k is one of EntryKinds.
func (k EntryKind) Known() bool {
	for _, have := range EntryKinds {
		if k == have {
			return true
		}
	}
	return false
}

// Status is the QueryState answer: the result so far and the timeline.
type Status struct {
	Result
	// Provider is the provider the run sends through: Input.Provider,
	// until a failover or a decision moves the event to another.
	Provider string `json:"provider"`
	// To is the masked recipient.
	To string `json:"to"`
	// CurrentKey is the key of the send in progress or last made.
	CurrentKey string `json:"currentKey"`
	// DecisionDeadline is set while awaiting a decision.
	DecisionDeadline time.Time `json:"decisionDeadline"`
	Warnings         []string  `json:"warnings,omitempty"`
	Timeline         []Entry   `json:"timeline"`
}

// ResultFromError reads the Result carried by the error of a run that ended
// Failed (ApplicationError of type FailureType) or Cancelled (CanceledError);
// ok is false for any other error.
func ResultFromError(err error) (res Result, ok bool) {
	var appErr *temporal.ApplicationError
	var canceled *temporal.CanceledError
	switch {
	case errors.As(err, &appErr) && appErr.Type() == FailureType && appErr.HasDetails():
		return res, appErr.Details(&res) == nil
	case errors.As(err, &canceled) && canceled.HasDetails():
		return res, canceled.Details(&res) == nil
	}
	return res, false
}
