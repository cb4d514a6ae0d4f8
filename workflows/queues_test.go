package workflows

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
)

// providerActivity is one provider activity as a run scheduled it.
type providerActivity struct {
	activity, queue, runQueue, provider string
	priority                            int
}

// recordProviderActivities records every activity a run schedules: its queue and
// priority as given, and the provider its input names.
func recordProviderActivities(h *harness) *[]providerActivity {
	var mu sync.Mutex
	var out []providerActivity
	h.env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&scheduled{record: func(ctx workflow.Context, name string, args []any) {
		o := workflow.GetActivityOptions(ctx)
		s := providerActivity{activity: name, queue: o.TaskQueue, runQueue: workflow.GetInfo(ctx).TaskQueueName, priority: o.Priority.PriorityKey}
		switch in := args[0].(type) {
		case activities.SendInput:
			s.provider = string(in.Request.Provider)
		case activities.StatusInput:
			s.provider = in.Provider
		case activities.ReconcileInput:
			s.provider = in.Provider
		default:
			return
		}
		mu.Lock()
		defer mu.Unlock()
		out = append(out, s)
	}}}})
	return &out
}

// checkQueuesAndPriorities: before version 10 every provider activity is on the
// queue of its purpose at the provider its input names, with the
// priority it always had (a search 1, the rest none); since, on the
// provider's one queue with search 1, send 2, lookup 3.
func checkQueuesAndPriorities(t *testing.T, v workflow.Version, got []providerActivity) {
	t.Helper()
	require.NotEmpty(t, got)
	for _, s := range got {
		purpose, pri := contract.PurposeLookup, 0
		switch s.activity {
		case "Send":
			purpose = contract.PurposeSend
		case "Reconcile":
			pri = reconcilePriority
		}
		want := contract.ProviderTaskQueue(s.runQueue, canonical(s.provider), purpose)
		if v >= versionOneProviderQueue {
			want = contract.ProviderQueue(s.runQueue, canonical(s.provider))
			pri = map[string]int{"Send": contract.PrioritySend, "Status": contract.PriorityLookup, "Reconcile": contract.PrioritySearch}[s.activity]
		}
		require.Equal(t, want, s.queue, "version %d: %s for %s", v, s.activity, s.provider)
		require.Equal(t, pri, s.priority, "version %d: %s for %s", v, s.activity, s.provider)
	}
}

// Every provider activity of a run, at every version that has provider
// queues, on the queue and with the priority of its version: every
// attempt unknown and the search finds the message (since
// versionProviderQueues); a failover with its searches at bird, the move,
// the send and lookup at sendy and the late look back at bird (since
// versionFailover).
func TestQueuesAndPrioritiesByVersion(t *testing.T) {
	t.Parallel()
	for _, sc := range []struct {
		name string
		from workflow.Version
		run  func(h *harness)
	}{
		{"unknown then found", versionProviderQueues, func(h *harness) { h.unknownThenFound() }},
		{"failover", versionFailover, func(h *harness) {
			h.uncertainThenMovedToSendy()
			res, err := h.result()
			require.NoError(h.t, err)
			require.Equal(h.t, contract.Delivered, res.State, res.Reason)
		}},
	} {
		for v := sc.from; v <= latestVersion; v++ {
			t.Run(fmt.Sprintf("%s, version %d", sc.name, v), func(t *testing.T) {
				t.Parallel()
				h := newHarness(t)
				h.env.OnGetVersion(changeNoSilentDuplicates, workflow.DefaultVersion, latestVersion).Return(v)
				got := recordProviderActivities(h)
				sc.run(h)
				if sc.from == versionFailover {
					providers := map[string]bool{}
					for _, s := range *got {
						providers[canonical(s.provider)] = true
					}
					require.True(t, providers["bird"] && providers["sendy"], "activities at both providers: %v", *got)
				}
				checkQueuesAndPriorities(t, v, *got)
			})
		}
	}
}
