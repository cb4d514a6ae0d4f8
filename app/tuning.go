package app

import (
	"errors"
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
	// history at its next task. Default DefaultStickyCacheSize.
	StickyCacheSize int
	// WorkflowPollers and ActivityPollers are the long polls each worker
	// keeps open per task queue (SDK default 2 each).
	WorkflowPollers, ActivityPollers int
}

// DefaultStickyCacheSize is the worker's sticky cache: a cached run
// costs the worker about 85 KB (measured by smsbench with runs awaiting
// a decision), so the SDK's 10,000 would let idle runs take some 850 MB,
// while the runs a busy worker has in flight stay well under 1,000. A
// run that left the cache replays its history (30 to 60 events) at its
// next task: a decision, days later.
const DefaultStickyCacheSize = 1000

// stickyOnce guards the sticky cache size: the SDK keeps one cache per
// process, sized before the first worker starts.
var (
	stickyOnce sync.Once
	stickySize int
)

// Apply checks the tuning (Validate) and sizes the process's sticky
// cache. Call it before the first worker starts; a second call with
// another size is refused.
func (t Tuning) Apply() error {
	if err := t.Validate(); err != nil {
		return err
	}
	size := t.StickyCacheSize
	if size == 0 {
		size = DefaultStickyCacheSize
	}
	stickyOnce.Do(func() {
		stickySize = size
		worker.SetStickyWorkflowCacheSize(size)
	})
	if stickySize != size {
		return fmt.Errorf("the sticky cache is already sized %d in this process; it cannot become %d", stickySize, size)
	}
	return nil
}

// Validate refuses what the SDK would panic on, or quietly replace.
func (t Tuning) Validate() error {
	var errs []error
	switch {
	case t.WorkflowPollers < 0:
		errs = append(errs, fmt.Errorf("--workflow-pollers %d is negative: give the long polls per workflow task queue (at least 2), or 0 for the SDK's 2", t.WorkflowPollers))
	case t.WorkflowPollers == 1:
		// One poll is shared by the queue and the worker's sticky queue.
		errs = append(errs, errors.New("--workflow-pollers 1 is refused by the Temporal SDK (a worker polls its task queue and its sticky queue): give at least 2, or 0 for the SDK's 2"))
	}
	if t.ActivityPollers < 0 {
		errs = append(errs, fmt.Errorf("--activity-pollers %d is negative: give the long polls per activity task queue (at least 1), or 0 for the SDK's 2", t.ActivityPollers))
	}
	if t.StickyCacheSize < 0 {
		errs = append(errs, fmt.Errorf("--sticky-cache %d is negative: give the number of runs to keep in memory, or 0 for the default (%d)", t.StickyCacheSize, DefaultStickyCacheSize))
	}
	if t.StopTimeout < 0 {
		errs = append(errs, fmt.Errorf("--stop-timeout %s is negative: give how long a stopping worker waits for sends in flight, like 25s", t.StopTimeout))
	}
	return errors.Join(errs...)
}

// WorkerOptions are the options of every worker the process starts.
func (t Tuning) WorkerOptions() worker.Options {
	return worker.Options{
		WorkerStopTimeout:                t.StopTimeout,
		MaxConcurrentWorkflowTaskPollers: t.WorkflowPollers,
		MaxConcurrentActivityTaskPollers: t.ActivityPollers,
	}
}
