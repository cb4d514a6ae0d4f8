package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/app"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
)

// Two workers on one task queue with two different ledgers (two SQLite
// files, as on two hosts that were not given a shared one). The first runs
// the workflow and the activities, the second only activities, and no
// activity is dispatched eagerly, so each event's activities spread over
// both. Each refuses the ledger that did not claim the event, so an
// event's records are never split between the two; every event still
// settles, once, in the ledger that claimed it.
func TestTwoLedgersNeverSplitAnEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	queue := "sms-two-ledgers-" + uniqueID()
	open := func(name string) *ledger.SQLite {
		l, err := ledger.OpenSQLite(ctx, filepath.Join(t.TempDir(), name))
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	first, second := open("host-a.db"), open("host-b.db")
	core, logs := observer.New(zapcore.WarnLevel)
	log := zap.New(core)
	// A send may meet the wrong ledger several times running before the
	// right worker takes it: a window of two minutes leaves it the room a
	// real window of hours does, instead of the suite's 12 s.
	policies := map[provider.Name]activities.Policy{}
	for p, pol := range stack.Activities.Policies {
		pol.ReplayWindow, pol.WindowMargin = 2*time.Minute, 10*time.Second
		policies[p] = pol
	}
	for i, l := range []*ledger.SQLite{first, second} {
		// Each "host" has its own connection and identity, as two worker
		// processes would.
		c, err := client.Dial(client.Options{HostPort: stack.Stack.FrontendAddress(), Identity: fmt.Sprintf("host-%d@two-ledgers", i+1), Logger: logging.SDK(zap.NewNop())})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		// The second host only runs activities: without
		// DisableWorkflowWorker the SDK still polls workflow tasks, fails
		// each it takes ("unable to find workflow type") and the run's
		// next task waits out a growing retry, long enough on a loaded
		// machine to pass the tracking limit.
		w := worker.New(c, queue, worker.Options{DisableEagerActivities: true, DisableWorkflowWorker: i > 0})
		acts := &activities.Activities{Providers: stack.Activities.Providers, Policies: policies, Ledger: l, Logger: log}
		if i == 0 {
			app.Register(w, acts)
		} else {
			w.RegisterActivity(acts)
		}
		require.NoError(t, w.Start())
		t.Cleanup(w.Stop)
		// The sends and lookups of runs on queue, beside it.
		pw, err := app.StartProviderWorkers(c, queue, acts, app.QueueLimits{}, app.Tuning{StopTimeout: time.Second})
		require.NoError(t, err)
		t.Cleanup(pw.Stop)
	}

	events := make([]contract.Input, 10)
	results := make([]contract.Result, len(events))
	var wg sync.WaitGroup
	for i := range events {
		events[i] = input([]provider.Name{provider.Bird, provider.Sendy}[i%2], newKey("shipped"))
		wg.Add(1)
		go func() {
			defer wg.Done()
			run, err := stack.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
				ID: events[i].Key, TaskQueue: queue, WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
			}, contract.WorkflowName, events[i])
			require.NoError(t, err)
			// Each refusal costs a retry (activities.WrongLedgerRetry), and
			// an activity may meet the wrong ledger several times running.
			results[i], err = resultWithin(t, run, 3*time.Minute)
			require.NoError(t, err)
		}()
	}
	wg.Wait()

	claimed := map[string]int{}
	for i, in := range events {
		require.Equal(t, contract.Delivered, results[i].State, in.Key)
		require.Len(t, messages(provider.Name(in.Provider), in.Key), 1, "one message for %s", in.Key)
		_, errA := first.Event(ctx, in.Key)
		_, errB := second.Event(ctx, in.Key)
		require.True(t, (errA == nil) != (errB == nil), "%s is in both ledgers or in neither", in.Key)
		var holder, other ledger.Ledger = first, second
		if errB == nil {
			holder, other = second, first
		}
		claimed[holder.Identity()]++
		e, err := holder.Event(ctx, in.Key)
		require.NoError(t, err)
		require.Equal(t, "Delivered", e.Outcome, "%s settled in the ledger that claimed it", in.Key)
		attempts, err := holder.Attempts(ctx, in.Key)
		require.NoError(t, err)
		require.NotEmpty(t, attempts)
		none, err := other.Attempts(ctx, in.Key)
		require.NoError(t, err)
		require.Empty(t, none, "no attempt of %s in the other ledger", in.Key)
		for _, e := range history(t, in.Key, "") {
			require.NotEqual(t, enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, e.EventType, "%s: a workflow task failed: %v", in.Key, e.GetWorkflowTaskFailedEventAttributes())
		}
	}
	refused := logs.FilterMessageSnippet("another ledger claimed").Len()
	t.Logf("events claimed per ledger: %v; activities refused for the wrong ledger: %d", claimed, refused)
	require.Positive(t, refused, "activities spread over both workers met the wrong ledger")
}
