package app

import (
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/worker"
)

// Tuning is how a worker process polls and caches: the same settings for
// every Temporal worker it starts (and for the benchmark's bare worker,
// so the two compare on equal terms). Zero fields take the SDK's
// defaults.
type Tuning struct {
	// StopTimeout is how long a stopping worker waits for activities in
	// flight (a send whose answer is on its way) to finish and be recorded.
	StopTimeout time.Duration
	// StickyCacheSize is how many runs the process keeps in memory
	// between their workflow tasks; a run not in it is replayed from its
	// history at its next task. The SDK's default is 10,000.
	StickyCacheSize int
	// WorkflowPollers and ActivityPollers are the long polls each worker
	// keeps open per task queue (SDK default 2 each).
	WorkflowPollers, ActivityPollers int
}

// stickyOnce guards the sticky cache size: the SDK keeps one cache per
// process, sized before the first worker starts.
var (
	stickyOnce sync.Once
	stickySize int
)

// Apply sizes the process's sticky cache. Call it before the first
// worker starts; a second call with another size is refused.
func (t Tuning) Apply() error {
	if t.StickyCacheSize < 0 {
		return fmt.Errorf("sticky cache size %d is negative: give the number of runs to keep in memory, or 0 for the default", t.StickyCacheSize)
	}
	if t.StickyCacheSize == 0 {
		return nil
	}
	stickyOnce.Do(func() {
		stickySize = t.StickyCacheSize
		worker.SetStickyWorkflowCacheSize(t.StickyCacheSize)
	})
	if stickySize != t.StickyCacheSize {
		return fmt.Errorf("the sticky cache is already sized %d in this process; it cannot become %d", stickySize, t.StickyCacheSize)
	}
	return nil
}

// WorkerOptions are the options of every worker the process starts.
func (t Tuning) WorkerOptions() worker.Options {
	return worker.Options{
		WorkerStopTimeout:                t.StopTimeout,
		MaxConcurrentWorkflowTaskPollers: t.WorkflowPollers,
		MaxConcurrentActivityTaskPollers: t.ActivityPollers,
	}
}
