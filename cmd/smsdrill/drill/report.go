package drill

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/provider"
)

// Outcome is what the drill learned about one event, from every side:
// what the starts answered, what the run says, what the audit proves,
// and the messages the simulator created under all the event's keys.
type Outcome struct {
	Key      string        `json:"key"`
	Provider provider.Name `json:"provider"`
	// Down is true for the events whose provider stayed down past the window.
	Down bool `json:"down,omitempty"`
	// Slice names the event's scripted faults, if any (see Config).
	Slice string `json:"slice,omitempty"`
	// Started and Existing count the starts answered "started a run" and
	// "the run already exists"; AfterSettled is what the start made after
	// the run had ended ("existing" is right).
	Started, Existing int
	// Unanswered counts the posts that got no answer within their retries.
	Unanswered   int    `json:"unanswered,omitempty"`
	AfterSettled string `json:"afterSettled"`
	// Ended is false when the run never reached a final state.
	Ended          bool                `json:"ended"`
	Result         contract.Result     `json:"result"`
	Forced         bool                `json:"forced,omitempty"`
	Audit          string              `json:"audit,omitempty"`
	AuditDuplicate bool                `json:"auditDuplicate,omitempty"`
	Messages       []simulator.Message `json:"messages"`
	// Resets counts the operator resets of the event's run (reset slice);
	// ResetError is why one could not be made.
	Resets     int    `json:"resets,omitempty"`
	ResetError string `json:"resetError,omitempty"`
	// UnknownUnsent is true when the run awaited a decision calling its
	// outcome unknown while the provider never received a send of it.
	UnknownUnsent bool `json:"unknownUnsent,omitempty"`
	// Requeued counts the times the run (burst slice) found that its send
	// never left the task queue within the window, and sent again.
	Requeued int `json:"requeued,omitempty"`
}

// live reports the messages that reached, or may still reach, a phone.
func (o Outcome) live() []simulator.Message {
	var out []simulator.Message
	for _, m := range o.Messages {
		if m.Status != "failed" && m.Status != "undelivered" { // both providers' raw names
			out = append(out, m)
		}
	}
	return out
}

// reported is true when the run or the audit says a second message
// exists or may exist.
func (o Outcome) reported() bool {
	return o.Result.DuplicateSend || o.Result.PossibleDuplicate || o.AuditDuplicate
}

// unknownToRun lists the messages of the event the run's result does not
// name.
func (o Outcome) unknownToRun() []string {
	known := map[string]bool{}
	for _, id := range o.Result.MessageIDs {
		known[id] = true
	}
	var out []string
	for _, m := range o.Messages {
		if !known[m.ID] {
			out = append(out, m.ID)
		}
	}
	return out
}

// Summary is the drill's table: the counts, and every violation by key.
type Summary struct {
	Seed uint64 `json:"seed"`
	// PlainRecipients are the places where a recipient stood in full: a
	// log file, the ledger, a run's timeline, smsctl's output.
	PlainRecipients []string `json:"plainRecipients,omitempty"`
	Events          int      `json:"events"`
	// Topology says what ran: one dev process, or the cluster.
	Topology string `json:"topology"`
	Kills    int    `json:"kills"`
	// KillsDone names each process killed, in order.
	KillsDone []string `json:"killsDone"`
	// Starts answered, over every post of every event.
	StartsStarted  int `json:"startsStarted"`
	StartsExisting int `json:"startsExisting"`
	// StartsFailed are posts that never got an answer (every retry failed).
	StartsFailed int            `json:"startsFailed"`
	States       map[string]int `json:"states"`
	Messages     int            `json:"providerMessages"`
	LiveMessages int            `json:"liveMessages"`
	// DuplicatesReported are events with more than one live message that
	// the run or the audit reports; DuplicatesReportedByRun those the run
	// itself reports (proven or possible).
	DuplicatesReported      int `json:"duplicatesReported"`
	DuplicatesReportedByRun int `json:"duplicatesReportedByRun"`
	// PossibleReported are runs that report a possible duplicate (whether
	// or not a second message exists).
	PossibleReported int `json:"possibleDuplicatesReported"`
	BlindResends     int `json:"blindResends"`
	// BlindDuplicates are duplicates that a blind resend made.
	BlindDuplicates int `json:"blindResendDuplicates"`
	Resends         int `json:"resends"`
	// Failovers are the runs' own moves to their fallback provider.
	Failovers int `json:"failovers"`
	// Resets are the operator resets made (reset slice), Rotated the
	// events that met a credential rotation after an unknown attempt,
	// Burst the Sendy events of the burst.
	Resets  int `json:"resets"`
	Rotated int `json:"rotated"`
	Burst   int `json:"burst"`
	// Requeued are the sends of the burst that waited in the task queue
	// past their window and were sent again.
	Requeued int `json:"requeued"`
	// OutcomeUnknown are runs that ended saying an SMS may have gone out.
	OutcomeUnknown int `json:"outcomeUnknown"`

	// The violations: each must be zero.
	SilentDuplicates    []string `json:"silentDuplicates"`
	LostEvents          []string `json:"lostEvents"`
	UnknownMessages     []string `json:"messagesTheRunDoesNotKnow"`
	UnreconciledResends []string `json:"resendsWithoutReconciliation"`
	SecondStarts        []string `json:"eventsStartedTwice"`
	StartedAfterSettled []string `json:"startedAfterSettled"`
	// UnknownButUnsent are runs that awaited a decision as "unknown"
	// though the provider never received a send of the event.
	UnknownButUnsent []string `json:"unknownButUnsent"`
}

// Summarize counts the outcomes and finds the violations.
func Summarize(seed uint64, kills int, outs []Outcome) Summary {
	s := Summary{Seed: seed, Events: len(outs), Kills: kills, States: map[string]int{},
		SilentDuplicates: []string{}, LostEvents: []string{}, UnknownMessages: []string{},
		UnreconciledResends: []string{}, SecondStarts: []string{}, StartedAfterSettled: []string{}, UnknownButUnsent: []string{}}
	for _, o := range outs {
		s.Resets += o.Resets
		s.Requeued += o.Requeued
		switch o.Slice {
		case "rotated":
			s.Rotated++
		case "burst":
			s.Burst++
		}
		if o.UnknownUnsent {
			s.UnknownButUnsent = append(s.UnknownButUnsent, o.Key)
		}
		s.StartsStarted += o.Started
		s.StartsExisting += o.Existing
		s.StartsFailed += o.Unanswered
		s.Messages += len(o.Messages)
		live := o.live()
		s.LiveMessages += len(live)
		if !o.Ended {
			s.States["(not ended)"]++
			s.LostEvents = append(s.LostEvents, o.Key)
			continue
		}
		s.States[string(o.Result.State)]++
		if o.Started > 1 {
			s.SecondStarts = append(s.SecondStarts, o.Key)
		}
		if o.AfterSettled == "started" {
			s.StartedAfterSettled = append(s.StartedAfterSettled, o.Key)
		}
		if o.Result.PossibleDuplicate {
			s.PossibleReported++
		}
		if o.Result.OutcomeUnknown {
			s.OutcomeUnknown++
		}
		s.BlindResends += len(o.Result.BlindResends)
		s.Resends += len(o.Result.Resends)
		for _, r := range o.Result.Resends {
			if r.Basis == contract.BasisNoMessage {
				s.Failovers++
			}
			if r.Basis != contract.BasisReconciled && r.Basis != contract.BasisDeliveryFailed && r.Basis != contract.BasisBlind && r.Basis != contract.BasisNoMessage {
				s.UnreconciledResends = append(s.UnreconciledResends, r.Key)
			}
		}
		if len(live) > 1 {
			switch {
			case !o.reported():
				s.SilentDuplicates = append(s.SilentDuplicates, o.Key)
			default:
				s.DuplicatesReported++
				if o.Result.DuplicateSend || o.Result.PossibleDuplicate {
					s.DuplicatesReportedByRun++
				}
				if len(o.Result.BlindResends) > 0 {
					s.BlindDuplicates++
				}
			}
		}
		// Where the provider can be searched by key (Bird), every message
		// of the event must be known to its run.
		if o.Provider == provider.Bird {
			for _, id := range o.unknownToRun() {
				s.UnknownMessages = append(s.UnknownMessages, o.Key+":"+id)
			}
		}
	}
	return s
}

// Violations lists what broke a promise, one line each; empty is a pass.
func (s Summary) Violations() []string {
	var out []string
	add := func(what string, keys []string) {
		if len(keys) > 0 {
			out = append(out, fmt.Sprintf("%s: %d (%s)", what, len(keys), strings.Join(first(keys, 10), ", ")))
		}
	}
	add("silent duplicates", s.SilentDuplicates)
	add("lost events", s.LostEvents)
	add("messages the run does not know", s.UnknownMessages)
	add("resends without a reconciliation before them", s.UnreconciledResends)
	add("events that started more than one run", s.SecondStarts)
	add("starts after the run had settled that started a new run", s.StartedAfterSettled)
	add("runs awaiting a decision as unknown that never sent", s.UnknownButUnsent)
	add("places that show a recipient in full", s.PlainRecipients)
	if s.StartsFailed > 0 {
		// A client that could not hand its event over may have lost it.
		out = append(out, fmt.Sprintf("posts never answered within their retries: %d", s.StartsFailed))
	}
	return out
}

func first(keys []string, n int) []string {
	if len(keys) > n {
		return append(append([]string(nil), keys[:n]...), "…")
	}
	return keys
}

// Print writes the summary as a table.
func (s Summary) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(tw, "%s\t%v\n", k, v) }
	row("seed", s.Seed)
	row("events", s.Events)
	row("processes", s.Topology)
	row("kills (SIGKILL)", fmt.Sprintf("%d: %s", s.Kills, strings.Join(s.KillsDone, ", ")))
	row("starts answered started / existing / never", fmt.Sprintf("%d / %d / %d", s.StartsStarted, s.StartsExisting, s.StartsFailed))
	states := make([]string, 0, len(s.States))
	for k := range s.States {
		states = append(states, k)
	}
	sort.Strings(states)
	for _, k := range states {
		row("  runs "+k, s.States[k])
	}
	row("events settled (run ended)", s.Events-len(s.LostEvents))
	row("provider messages (live)", fmt.Sprintf("%d (%d)", s.Messages, s.LiveMessages))
	row("duplicates reported by the run or the audit / by the run", fmt.Sprintf("%d / %d", s.DuplicatesReported, s.DuplicatesReportedByRun))
	row("runs reporting a possible duplicate", s.PossibleReported)
	row("resends / blind (forced) / duplicates they caused", fmt.Sprintf("%d / %d / %d", s.Resends, s.BlindResends, s.BlindDuplicates))
	row("failovers to the fallback provider (on proof)", s.Failovers)
	row("operator resets / credential rotations / Sendy burst", fmt.Sprintf("%d / %d / %d", s.Resets, s.Rotated, s.Burst))
	if s.Burst > 0 {
		row("burst sends that never left the queue in their window, sent again", s.Requeued)
	}
	row("runs ending with the outcome unknown (an SMS may have gone out)", s.OutcomeUnknown)
	row("SILENT DUPLICATES", len(s.SilentDuplicates))
	row("LOST EVENTS", len(s.LostEvents))
	row("MESSAGES THE RUN DOES NOT KNOW (bird)", len(s.UnknownMessages))
	row("RESENDS WITHOUT RECONCILIATION", len(s.UnreconciledResends))
	row("EVENTS STARTED TWICE", len(s.SecondStarts))
	row("NEW RUNS AFTER SETTLED", len(s.StartedAfterSettled))
	row("UNKNOWN BUT NEVER SENT", len(s.UnknownButUnsent))
	row("RECIPIENTS IN FULL (logs, ledger, timelines, smsctl)", len(s.PlainRecipients))
	_ = tw.Flush()
}
