package bench

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/acme/smsorch/app"
)

// The bare workflow: one no-op activity, the ceiling of any
// orchestrator on Temporal on the same server and worker settings.
const (
	BareWorkflowName = "BenchBare"
	BareTaskQueue    = "smsbench-bare"
)

// BareWorkflow runs BareActivity once and returns when it ran, the
// moment that stands for a provider's acceptance.
func BareWorkflow(ctx workflow.Context) (time.Time, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	var at time.Time
	err := workflow.ExecuteActivity(ctx, BareActivity).Get(ctx, &at)
	return at, err
}

// BareActivity does nothing but say when it ran.
func BareActivity(context.Context) (time.Time, error) { return time.Now(), nil }

// RunBareWorker polls the bare workflow's queue with the worker settings
// the orchestrator's worker uses, until ctx ends.
func RunBareWorker(ctx context.Context, opts client.Options, tuning app.Tuning) error {
	if err := tuning.Apply(); err != nil {
		return err
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return fmt.Errorf("dial Temporal at %s: %w", opts.HostPort, err)
	}
	defer c.Close()
	w := worker.New(c, BareTaskQueue, tuning.WorkerOptions())
	w.RegisterWorkflowWithOptions(BareWorkflow, workflow.RegisterOptions{Name: BareWorkflowName})
	w.RegisterActivity(BareActivity)
	if err := w.Start(); err != nil {
		return fmt.Errorf("start the bare worker: %w", err)
	}
	<-ctx.Done()
	w.Stop()
	return nil
}
