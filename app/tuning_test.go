package app

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
