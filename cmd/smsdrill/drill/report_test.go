package drill

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/starter"
)

func msg(id, key, status string) simulator.Message {
	return simulator.Message{ID: id, Key: key, Status: status}
}

// The summary finds each kind of violation, and only those.
func TestSummarizeFindsEveryViolation(t *testing.T) {
	t.Parallel()
	ok := func(key string, p provider.Name, res contract.Result, msgs ...simulator.Message) Outcome {
		return Outcome{Key: key, Provider: p, Started: 1, Existing: 2, AfterSettled: "existing", Ended: true, Result: res, Messages: msgs}
	}
	outs := []Outcome{
		// One message, known: fine.
		ok("a", provider.Bird, contract.Result{State: contract.Delivered, MessageIDs: []string{"m1"}}, msg("m1", "a", "delivered")),
		// Two live messages, reported by the run: a reported duplicate.
		ok("b", provider.Bird, contract.Result{State: contract.Delivered, MessageIDs: []string{"m2", "m3"}, DuplicateSend: true},
			msg("m2", "b", "delivered"), msg("m3", "b", "delivered")),
		// Two live messages, nobody says so: silent.
		ok("c", provider.Sendy, contract.Result{State: contract.Delivered, MessageIDs: []string{"m4"}},
			msg("m4", "c", "delivered"), msg("m5", "c", "delivered")),
		// A failed message and its resend: one live message, not a duplicate.
		ok("d", provider.Bird, contract.Result{State: contract.Delivered, MessageIDs: []string{"m6", "m7"},
			Resends: []contract.Resend{{Key: "d~resend-1", Basis: contract.BasisDeliveryFailed}}},
			msg("m6", "d", "failed"), msg("m7", "d~resend-1", "delivered")),
		// A Bird message the run does not know (one live, so no duplicate).
		ok("e", provider.Bird, contract.Result{State: contract.Delivered, MessageIDs: []string{"m8"}},
			msg("m8", "e", "delivered"), msg("m9", "e", "failed")),
		// A resend sent without a reconciliation: a basis no run gives.
		ok("f", provider.Bird, contract.Result{State: contract.Delivered, MessageIDs: []string{"m10"},
			Resends: []contract.Resend{{Key: "f~resend-1", Basis: "unreconciled"}}}, msg("m10", "f~resend-1", "delivered")),
		// Never ended; one of its posts was never answered.
		{Key: "g", Provider: provider.Sendy, Started: 1, Unanswered: 1},
		// Two runs started, and a start after settling started a third.
		{Key: "h", Provider: provider.Sendy, Started: 2, AfterSettled: "started", Ended: true, Result: contract.Result{State: contract.Cancelled}},
		// A blind resend that made a second live message, reported as possible.
		ok("i", provider.Sendy, contract.Result{State: contract.Delivered, MessageIDs: []string{"m12"}, PossibleDuplicate: true,
			BlindResends: []string{"i~resend-1"}, Resends: []contract.Resend{{Key: "i~resend-1", Basis: contract.BasisBlind}}},
			msg("m11", "i", "delivered"), msg("m12", "i~resend-1", "delivered")),
	}
	s := Summarize(7, 3, outs)
	require.Equal(t, []string{"c"}, s.SilentDuplicates)
	require.Equal(t, []string{"g"}, s.LostEvents)
	require.Equal(t, []string{"e:m9"}, s.UnknownMessages)
	require.Equal(t, []string{"f~resend-1"}, s.UnreconciledResends)
	require.Equal(t, []string{"h"}, s.SecondStarts)
	require.Equal(t, []string{"h"}, s.StartedAfterSettled)
	require.Equal(t, 2, s.DuplicatesReported, "b and i")
	require.Equal(t, 2, s.DuplicatesReportedByRun)
	require.Equal(t, 1, s.BlindDuplicates)
	require.Equal(t, 1, s.BlindResends)
	require.Equal(t, 3, s.Resends)
	require.Equal(t, 7, s.States["Delivered"])
	require.Equal(t, 1, s.StartsFailed)
	require.Contains(t, s.Violations(), "posts never answered within their retries: 1")
	require.Len(t, s.Violations(), 7)

	var b bytes.Buffer
	s.Print(&b)
	require.Contains(t, b.String(), "SILENT DUPLICATES")

	clean := Summarize(7, 3, outs[:2])
	require.Empty(t, clean.Violations())
}

func TestParseSeeds(t *testing.T) {
	t.Parallel()
	s, err := parseSeeds("1, 2")
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 2}, s)
	s, err = parseSeeds("clock")
	require.NoError(t, err)
	require.Len(t, s, 1)
	_, err = parseSeeds("x")
	require.ErrorContains(t, err, `seed "x" is neither a number nor "clock"`)
}

// The slices of resets, credential rotations and the Sendy burst are
// counted, and a run that awaited a decision as "unknown" without ever
// sending is a violation.
func TestSummarizeCountsResetsRotationsAndUnknownButUnsent(t *testing.T) {
	t.Parallel()
	ended := func(key, slice string, res contract.Result) Outcome {
		return Outcome{Key: key, Provider: provider.Sendy, Slice: slice, Started: 1, Existing: 2, AfterSettled: "existing", Ended: true, Result: res}
	}
	reset := ended("r", "reset", contract.Result{State: contract.Delivered})
	reset.Resets = 1
	unsent := ended("u", "burst", contract.Result{State: contract.Delivered})
	unsent.UnknownUnsent = true
	outs := []Outcome{
		reset,
		ended("o", "rotated", contract.Result{State: contract.Cancelled, OutcomeUnknown: true}),
		unsent,
		ended("b", "burst", contract.Result{State: contract.Delivered}),
	}
	s := Summarize(9, 0, outs)
	require.Equal(t, 1, s.Resets)
	require.Equal(t, 1, s.Rotated)
	require.Equal(t, 2, s.Burst)
	require.Equal(t, 1, s.OutcomeUnknown)
	require.Equal(t, []string{"u"}, s.UnknownButUnsent)
	require.Equal(t, []string{"runs awaiting a decision as unknown that never sent: 1 (u)"}, s.Violations())
	var b bytes.Buffer
	s.Print(&b)
	require.Contains(t, b.String(), "UNKNOWN BUT NEVER SENT")
}

// The search for recipients in full finds a number however it is
// written around, and not its masked form.
func TestTheSearchForRecipientsFindsThemInFull(t *testing.T) {
	t.Parallel()
	d := &drill{events: []*event{{e: starter.Event{To: "+31612345678"}}, {e: starter.Event{To: "+972501234567"}}}}
	var found []string
	d.look(&found, "a log", []byte(`{"to":"+31…78","msg":"sent"}`))
	require.Empty(t, found, "masked")
	d.look(&found, "a log", []byte(`{"msg":"provider refused 972501234567"}`))
	require.Equal(t, []string{"a log (+97…)"}, found)
	s := Summary{PlainRecipients: found}
	require.Contains(t, strings.Join(s.Violations(), "\n"), "places that show a recipient in full: 1 (a log (+97…))")
}
