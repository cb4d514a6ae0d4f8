package workflows

import (
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/sms"
)

// maxTimeline bounds the timeline kept in the run's state.
const maxTimeline = 100

func (r *run) addMessage(id string) {
	for _, have := range r.st.MessageIDs {
		if have == id {
			return
		}
	}
	r.st.MessageIDs = append(r.st.MessageIDs, id)
}

// note adds a line to the timeline and republishes the run's details.
func (r *run) note(format string, args ...any) {
	r.st.Timeline = append(r.st.Timeline, contract.Entry{At: workflow.Now(r.ctx), Text: fmt.Sprintf(format, args...)})
	if len(r.st.Timeline) > maxTimeline {
		r.st.Timeline = append(r.st.Timeline[:1], r.st.Timeline[len(r.st.Timeline)-maxTimeline+1:]...)
	}
	r.publish()
}

// publish sets the current details the Temporal UI shows: the state, the
// facts, and the timeline.
func (r *run) publish() {
	// fmt.Sprintf, not Fprintf: workflowcheck cannot tell that the writer
	// is a strings.Builder and flags Fprintf as a possible I/O call.
	var b strings.Builder
	put := func(format string, args ...any) { b.WriteString(fmt.Sprintf(format, args...)) }
	put("**%s** — SMS `%s` to %s via %s\n\n", r.st.State, r.in.Key, r.st.To, r.in.Provider)
	if r.st.Reason != "" {
		put("%s\n\n", r.st.Reason)
	}
	put("- messages: %s\n- attempts: %d, replays: %d\n- keys: %s\n",
		orNone(strings.Join(r.st.MessageIDs, ", ")), r.st.Attempts, r.st.Replays, strings.Join(r.st.KeysUsed, ", "))
	if r.st.DuplicateSend {
		put("- **duplicate send**: the provider holds more than one message for a key\n")
	} else if r.st.PossibleDuplicate {
		put("- **possible duplicate**: see the timeline\n")
	}
	if len(r.st.BlindResends) > 0 {
		put("- blind resends (forced, without a search that succeeded): %s\n", strings.Join(r.st.BlindResends, ", "))
	}
	if r.st.State == contract.AwaitingDecision {
		put("- **decide**: signal `%s` or `%s` with `{\"reason\": \"...\", \"by\": \"...\"}` (a resend may add `\"force\": true`) before %s\n",
			contract.SignalResend, contract.SignalCancel, r.st.DecisionDeadline.Format(time.RFC3339))
	}
	put("\n**Timeline**\n\n")
	for _, e := range r.st.Timeline {
		put("- %s %s\n", e.At.UTC().Format("2006-01-02 15:04:05"), sms.MaskPhones(e.Text))
	}
	workflow.SetCurrentDetails(r.ctx, b.String())
}

func orNone(s string) string {
	if s == "" {
		return "none yet"
	}
	return s
}

func (r *run) snapshot() contract.Status {
	s := r.st
	s.MessageIDs = append([]string(nil), s.MessageIDs...)
	s.KeysUsed = append([]string(nil), s.KeysUsed...)
	s.ResendKeys = append([]string(nil), s.ResendKeys...)
	s.BlindResends = append([]string(nil), s.BlindResends...)
	s.Resends = append([]contract.Resend(nil), s.Resends...)
	s.Timeline = append([]contract.Entry(nil), s.Timeline...)
	return s
}
