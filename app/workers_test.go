package app

import (
	"context"
	"math"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	namespacepb "go.temporal.io/api/namespace/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/provider"
)

// fakeFrontend is a stand-in for the Temporal frontend: it answers
// DescribeNamespace with an error while down, and records the task
// queues activity pollers poll.
type fakeFrontend struct {
	workflowservice.UnimplementedWorkflowServiceServer
	mu     sync.Mutex
	down   bool
	polled map[string]bool
}

func (f *fakeFrontend) GetSystemInfo(context.Context, *workflowservice.GetSystemInfoRequest) (*workflowservice.GetSystemInfoResponse, error) {
	return &workflowservice.GetSystemInfoResponse{}, nil
}

func (f *fakeFrontend) DescribeNamespace(_ context.Context, r *workflowservice.DescribeNamespaceRequest) (*workflowservice.DescribeNamespaceResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return nil, status.Error(codes.PermissionDenied, "the frontend refused for a moment")
	}
	return &workflowservice.DescribeNamespaceResponse{NamespaceInfo: &namespacepb.NamespaceInfo{Name: r.GetNamespace()}}, nil
}

func (f *fakeFrontend) PollActivityTaskQueue(ctx context.Context, r *workflowservice.PollActivityTaskQueueRequest) (*workflowservice.PollActivityTaskQueueResponse, error) {
	f.mu.Lock()
	f.polled[r.GetTaskQueue().GetName()] = true
	f.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
	}
	return &workflowservice.PollActivityTaskQueueResponse{}, nil
}

func (f *fakeFrontend) isPolled(q string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.polled[q]
}

// fakeFrontendClient is a client of a fake frontend, down at first when
// down.
func fakeFrontendClient(t *testing.T, down bool) (client.Client, *fakeFrontend) {
	t.Helper()
	f := &fakeFrontend{down: down, polled: map[string]bool{}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	workflowservice.RegisterWorkflowServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	c, err := client.NewLazyClient(client.Options{HostPort: lis.Addr().String()})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c, f
}

// providersOf are activities with a client for each provider of limits.
func providersOf(limits map[provider.Name]int) *activities.Activities {
	providers := map[provider.Name]provider.Client{}
	for p := range limits {
		providers[p] = nil
	}
	return &activities.Activities{Providers: providers}
}

// Each configured provider's one queue is polled, at the rate its limit
// gives (none where it has none), and nothing else: the queues of one
// purpose each are gone with the versions that used them.
func TestEachProviderQueueIsPolledAtItsRate(t *testing.T) {
	t.Parallel()
	c, f := fakeFrontendClient(t, false)
	limits := QueueLimits{PerMinute: map[provider.Name]int{provider.Sendy: 60, provider.Bird: 0}, Partitions: 4}
	w, err := StartProviderWorkers(c, contract.TaskQueue, providersOf(limits.PerMinute), limits, Tuning{StopTimeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	want, err := limits.Rate(provider.Sendy)
	require.NoError(t, err)
	require.Greater(t, want, 0.0)
	for p, rate := range map[string]float64{"sendy": want, "bird": 0} {
		q := contract.ProviderQueue(contract.TaskQueue, p)
		got, ok := w.polls(q)
		require.True(t, ok, q)
		require.Equal(t, rate, got, q)
		require.Eventually(t, func() bool { return f.isPolled(q) }, 5*time.Second, 50*time.Millisecond, q)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	require.Len(t, f.polled, 2, "only the providers' queues: %v", f.polled)
}

// A provider worker that cannot start fails the start with the queue's
// name, and stops the ones that started.
func TestAProviderWorkerThatCannotStartFailsTheStart(t *testing.T) {
	t.Parallel()
	c, _ := fakeFrontendClient(t, true)
	limits := QueueLimits{PerMinute: map[provider.Name]int{provider.Sendy: 60}, Partitions: 1}
	_, err := StartProviderWorkers(c, contract.TaskQueue, providersOf(limits.PerMinute), limits, Tuning{StopTimeout: time.Second})
	require.ErrorContains(t, err, "start the worker on task queue "+contract.ProviderQueue(contract.TaskQueue, "sendy"))
}

// Small limits are accepted where the provider queue alone stays within
// them in any 60 s (limits of 12 to 15 a minute were accepted before).
func TestSmallLimitsStillValidate(t *testing.T) {
	t.Parallel()
	for _, perMinute := range []int{12, 15} {
		limits := QueueLimits{PerMinute: map[provider.Name]int{provider.Sendy: perMinute}, Partitions: 4}
		r, err := limits.Rate(provider.Sendy)
		require.NoError(t, err)
		require.LessOrEqual(t, 4*(1+int(math.Floor(61*r/4))), perMinute, "the worst 60 s on the provider queue")
		cfg := Config{Sendy: SendyConfig{BaseURL: "https://sendy", Token: "t"}, IntakeAddress: Off, PlaintextPayloads: true,
			RateLimits: map[provider.Name]int{provider.Sendy: perMinute}}.WithDefaults()
		if err := cfg.Validate(); err != nil {
			require.NotContains(t, err.Error(), "rate-limit", "--sendy-rate-limit=%d", perMinute)
		}
	}
}
