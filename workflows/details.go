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

// note adds a line of the given kind to the timeline and republishes the
// run's details.
func (r *run) note(kind contract.EntryKind, format string, args ...any) {
	// Masked: a provider's message or a person's reason may name a number,
	// and the timeline reaches the query, the intake's GET and smsctl.
	r.st.Timeline = append(r.st.Timeline, contract.Entry{At: workflow.Now(r.ctx), Kind: kind, Text: sms.MaskPhones(fmt.Sprintf(format, args...))})
	if len(r.st.Timeline) > maxTimeline {
		r.st.Timeline = append(r.st.Timeline[:1], r.st.Timeline[len(r.st.Timeline)-maxTimeline+1:]...)
	}
	r.publish()
}

// publish sets the current details the Temporal UI shows.
func (r *run) publish() {
	workflow.SetCurrentDetails(r.ctx, r.details())
}

// details are the run's state, facts and timeline as Markdown. Text that
// comes from outside (the reason, which may quote a provider's answer, a
// person's decision, message ids) is escaped, so it reads as written
// and cannot turn into links, emphasis or HTML; phone numbers in it are
// masked.
func (r *run) details() string {
	// fmt.Sprintf, not Fprintf: workflowcheck cannot tell that the writer
	// is a strings.Builder and flags Fprintf as a possible I/O call.
	var b strings.Builder
	put := func(format string, args ...any) { b.WriteString(fmt.Sprintf(format, args...)) }
	put("**%s** — SMS %s to %s via %s\n\n", r.st.State, codeSpan(r.in.Key), escapeMarkdown(r.st.To), escapeMarkdown(r.st.Provider))
	if r.st.Reason != "" {
		put("%s\n\n", lineStart(escapeMarkdown(sms.MaskPhones(r.st.Reason))))
	}
	put("- messages: %s\n- attempts: %d, replays: %d\n- keys: %s\n",
		orNone(escapeMarkdown(strings.Join(r.st.MessageIDs, ", "))), r.st.Attempts, r.st.Replays, escapeMarkdown(strings.Join(r.st.KeysUsed, ", ")))
	if r.st.DuplicateSend {
		put("- **duplicate send**: the provider holds more than one message for a key\n")
	} else if r.st.PossibleDuplicate {
		put("- **possible duplicate**: see the timeline\n")
	}
	if len(r.st.BlindResends) > 0 {
		put("- blind resends (forced, without a search that succeeded): %s\n", escapeMarkdown(strings.Join(r.st.BlindResends, ", ")))
	}
	if r.st.State == contract.AwaitingDecision {
		put("- **decide**: signal `%s` or `%s` with `%s` (a resend may add `\"force\": true`) before %s\n",
			contract.SignalResend, contract.SignalCancel, r.decisionForm(), r.st.DecisionDeadline.Format(time.RFC3339))
	}
	put("\n**Timeline**\n\n")
	for _, e := range r.st.Timeline {
		put("- %s %s\n", e.At.UTC().Format("2006-01-02 15:04:05"), escapeMarkdown(sms.MaskPhones(e.Text)))
	}
	return b.String()
}

// markdownSpecial are the characters that make Markdown of plain text:
// emphasis, code, links, HTML and tables.
const markdownSpecial = "\\`*_[]<>|"

// escapeMarkdown makes s read as written in Markdown, on one line: the
// special characters get a backslash and line breaks become spaces.
func escapeMarkdown(s string) string {
	var b strings.Builder
	for _, c := range strings.Join(strings.Fields(s), " ") {
		if strings.ContainsRune(markdownSpecial, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// lineStart escapes the start of an escaped text that begins a line and
// would make a heading, a list or a quote there.
func lineStart(s string) string {
	if s != "" && strings.ContainsRune("#-+=", rune(s[0])) {
		return "\\" + s
	}
	if i := strings.IndexFunc(s, func(c rune) bool { return c < '0' || c > '9' }); i > 0 && (s[i] == '.' || s[i] == ')') {
		return s[:i] + "\\" + s[i:]
	}
	return s
}

// codeSpan shows s as code, on one line; a backtick in it (which would
// end the span) shows as a quote.
func codeSpan(s string) string {
	return "`" + strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "`", "'") + "`"
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
	s.Reason = sms.MaskPhones(s.Reason)
	return s
}
