package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/acme/smsorch/contract"
)

// writeFindings prints what a person must know beyond the state: a
// duplicate proven or possible, and every resend with its basis.
func writeFindings(w io.Writer, r contract.Result) {
	switch {
	case r.DuplicateSend:
		fmt.Fprintln(w, "  DUPLICATE SEND: several accepted messages for one key (run smsctl audit "+r.Key+")")
	case r.PossibleDuplicate:
		fmt.Fprintln(w, "  POSSIBLE DUPLICATE: a second message may exist that the provider's records cannot confirm (see the timeline)")
	}
	for _, rs := range r.Resends {
		at := ""
		if rs.Provider != "" {
			at = " at " + rs.Provider
		}
		fmt.Fprintf(w, "  resend %s%s decided by %s (%s): %s\n", rs.Key, at, rs.By, rs.Reason, rs.Basis)
	}
}

func writeStatus(w io.Writer, st contract.Status) {
	fmt.Fprintf(w, "%s: %s\n", st.Key, st.State)
	if st.Reason != "" {
		fmt.Fprintf(w, "  %s\n", st.Reason)
	}
	fmt.Fprintf(w, "  to %s via %s; keys %s\n", st.To, st.Provider, strings.Join(st.KeysUsed, ", "))
	fmt.Fprintf(w, "  messages: %s (delivery: %s); attempts %d, replays %d\n", orNone(strings.Join(st.MessageIDs, ", ")), orNone(st.DeliveryStatus), st.Attempts, st.Replays)
	writeFindings(w, st.Result)
	if st.State == contract.AwaitingDecision {
		fmt.Fprintf(w, "  awaiting a decision until %s: smsctl resend|cancel %s --reason ... --by ...\n", st.DecisionDeadline.UTC().Format(time.RFC3339), st.Key)
	}
	fmt.Fprintln(w, "  timeline:")
	writeTimeline(w, st.Timeline)
}

// kindWidth is the width of the timeline's kind column: the longest kind.
var kindWidth = func() int {
	n := 0
	for _, k := range contract.EntryKinds {
		n = max(n, len(k))
	}
	return n
}()

// writeTimeline prints one line per entry: its time, its kind in a column
// of its own and its text.
func writeTimeline(w io.Writer, tl []contract.Entry) {
	for _, e := range tl {
		fmt.Fprintf(w, "    %s  %-*s  %s\n", e.At.UTC().Format("2006-01-02 15:04:05"), kindWidth, e.Kind, e.Text)
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
