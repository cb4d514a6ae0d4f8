package workflows

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/contract"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// golden compares got with testdata/golden/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *updateGolden {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./workflows -run %s -update to write it", t.Name())
	require.Equal(t, string(want), got)
}

// The details the UI shows, with free text that would be Markdown (a
// link, emphasis, HTML, a list, a line break, a table) in the reason, a
// decision and a provider's message id: it reads as written, and the
// numbers in it are masked.
func TestDetailsEscapeFreeText(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	r := &run{
		in: contract.Input{Key: "order-58213-shipped", Provider: "bird", To: "+31612345678", Text: "Your order shipped"},
		st: contract.Status{
			Result: contract.Result{
				Key: "order-58213-shipped", State: contract.AwaitingDecision,
				Reason:     "# bird answered 503 <b>E01033</b>: *service* unavailable [retry](http://evil.example) for +31612345678",
				MessageIDs: []string{"msg_1|x", "`msg2`"}, Attempts: 3, Replays: 1,
				KeysUsed: []string{"order-58213-shipped", "order-58213-shipped~resend-1"}, PossibleDuplicate: true,
				BlindResends: []string{"order-58213-shipped~resend-1"},
			},
			Provider:         "bird",
			To:               "+31…78",
			DecisionDeadline: at.Add(7 * 24 * time.Hour),
			Timeline: []contract.Entry{
				{At: at, Text: "sent under order-58213-shipped"},
				{At: at.Add(time.Minute), Text: "- resend decided by alice: customer called\nfrom 0031 6 1234 5678 # twice _really_"},
				{At: at.Add(2 * time.Minute), Text: "1. first | second"},
			},
		},
	}
	got := r.details()
	golden(t, "details-awaiting-decision.md", got)
	require.NotContains(t, got, "+31612345678")
	require.NotContains(t, got, "<b>")
	require.NotContains(t, got, "[retry](")
	require.Contains(t, got, "\n\\# bird answered", "a reason that would be a heading is escaped")
}
