package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"

	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/simulator"
	"github.com/acme/smsorch/workflows"
)

// TestRecordHistories writes the histories that workflows/replay_test.go
// replays on every run. It records only when asked:
//
//	SMSORCH_RECORD_HISTORY=1 go test ./integration -run TestRecordHistories
//
// Record again when a deliberate, versioned change to the workflow makes
// the old histories obsolete; never to silence a determinism failure.
func TestRecordHistories(t *testing.T) {
	if os.Getenv("SMSORCH_RECORD_HISTORY") == "" {
		t.Skip("set SMSORCH_RECORD_HISTORY=1 to record workflow histories into workflows/testdata")
	}
	ctx := context.Background()
	dir := filepath.Join("..", "workflows", "testdata")
	require.NoError(t, os.MkdirAll(dir, 0o755))

	// A dropped answer, replayed by the provider, then delivered.
	dropped := input(provider.Bird, newKey("shipped"))
	fault(t, simulator.Fault{Kind: simulator.DropAfterCommit, Provider: "bird", Key: dropped.Key})
	run, err := start(ctx, dropped)
	require.NoError(t, err)
	_, err = result(t, run)
	require.NoError(t, err)
	save(t, dir, "dropped-answer-replayed.json", dropped.Key)

	// The provider down past the window, reconciliation, a refused signal,
	// a resend decision, a new key, delivery.
	down := downPastTheWindow(t, provider.Sendy)
	require.NoError(t, stack.Client.SignalWorkflow(ctx, down.Key, "", workflows.SignalResend, map[string]string{"reason": "no by"}))
	require.NoError(t, stack.Client.SignalWorkflow(ctx, down.Key, "", workflows.SignalResend, map[string]string{"reason": "customer called", "by": "alice"}))
	_, err = result(t, stack.Client.GetWorkflow(ctx, down.Key, ""))
	require.NoError(t, err)
	save(t, dir, "down-reconcile-resend.json", down.Key)
}

func save(t *testing.T, dir, name, id string) {
	t.Helper()
	it := stack.Client.GetWorkflowHistory(context.Background(), id, "", false, 0)
	var h historypb.History
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, ev)
	}
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(&h)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	t.Logf("recorded %d events of %s into %s", len(h.Events), id, name)
}
