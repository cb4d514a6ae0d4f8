package app

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// The sticky cache is one per process: the default unless given, and a
// second size refused rather than silently ignored.
func TestTuningSizesTheStickyCacheOnce(t *testing.T) {
	require.NoError(t, Tuning{}.Apply())
	require.Equal(t, DefaultStickyCacheSize, stickySize)
	require.NoError(t, Tuning{StickyCacheSize: DefaultStickyCacheSize}.Apply())
	require.ErrorContains(t, Tuning{StickyCacheSize: 5}.Apply(), "already sized 1000")
	require.ErrorContains(t, Tuning{StickyCacheSize: -1}.Apply(), "negative")
	opts := Tuning{StopTimeout: time.Second, WorkflowPollers: 3, ActivityPollers: 4}.WorkerOptions()
	require.Equal(t, worker.Options{WorkerStopTimeout: time.Second, MaxConcurrentWorkflowTaskPollers: 3, MaxConcurrentActivityTaskPollers: 4}, opts)
}

// Settings the SDK would panic on (one workflow poller) or quietly
// replace (negative counts) are refused by Validate, before any worker
// starts, with the flag to change; the SDK's own check is what the one
// poller case guards against.
func TestTuningRefusesWhatTheSDKWouldPanicOn(t *testing.T) {
	for _, tc := range []struct {
		tuning Tuning
		want   string
	}{
		{Tuning{WorkflowPollers: 1}, "--workflow-pollers 1"},
		{Tuning{WorkflowPollers: -2}, "--workflow-pollers -2"},
		{Tuning{ActivityPollers: -1}, "--activity-pollers -1"},
		{Tuning{StickyCacheSize: -1}, "--sticky-cache -1"},
		{Tuning{StopTimeout: -time.Second}, "--stop-timeout -1s"},
	} {
		require.ErrorContains(t, tc.tuning.Validate(), tc.want)
	}
	require.NoError(t, Tuning{WorkflowPollers: 2, ActivityPollers: 1}.Validate())
	require.NoError(t, Tuning{}.Validate(), "zero takes the SDK's defaults")
	c, err := client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1"})
	require.NoError(t, err)
	defer c.Close()
	require.PanicsWithValue(t, "cannot set MaxConcurrentWorkflowTaskPollers to 1", func() {
		worker.New(c, "q", Tuning{WorkflowPollers: 1}.WorkerOptions())
	}, "the SDK panics on one workflow poller: the reason Validate refuses it")
	cfg := Config{Dev: true, DataDir: t.TempDir(), WorkflowPollers: 1}.WithDefaults()
	require.ErrorContains(t, cfg.Validate(), "--workflow-pollers 1", "the worker refuses it at start")
}
