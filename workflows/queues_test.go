package workflows

import (
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

// checkQueuesAndPriorities: every provider activity is on the one queue
// of the provider its input names, with search 1, send 2, lookup 3.
func checkQueuesAndPriorities(t *testing.T, got []providerActivity) {
	t.Helper()
	require.NotEmpty(t, got)
	for _, s := range got {
		want := contract.ProviderQueue(s.runQueue, canonical(s.provider))
		pri := map[string]int{"Send": contract.PrioritySend, "Status": contract.PriorityLookup, "Reconcile": contract.PrioritySearch}[s.activity]
		require.Equal(t, want, s.queue, "%s for %s", s.activity, s.provider)
		require.Equal(t, pri, s.priority, "%s for %s", s.activity, s.provider)
	}
}

// Every provider activity of a run on the queue and with the priority
// of its purpose: every attempt unknown and the search finds the
// message; a failover with its searches at bird, the move, the send and
// lookup at sendy and the late look back at bird.
func TestQueuesAndPrioritiesOfProviderActivities(t *testing.T) {
	t.Parallel()
	for _, sc := range []struct {
		name     string
		failover bool
		run      func(h *harness)
	}{
		{"unknown then found", false, func(h *harness) { h.unknownThenFound() }},
		{"failover", true, func(h *harness) {
			h.uncertainThenMovedToSendy()
			res, err := h.result()
			require.NoError(h.t, err)
			require.Equal(h.t, contract.Delivered, res.State, res.Reason)
		}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			got := recordProviderActivities(h)
			sc.run(h)
			if sc.failover {
				providers := map[string]bool{}
				for _, s := range *got {
					providers[canonical(s.provider)] = true
				}
				require.True(t, providers["bird"] && providers["sendy"], "activities at both providers: %v", *got)
			}
			checkQueuesAndPriorities(t, *got)
		})
	}
}
