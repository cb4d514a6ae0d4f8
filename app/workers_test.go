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

// A change of mode that failed (the frontend refused a poller's start)
// leaves the mode as it was, and the watcher's next try polls the old
// queues: runs from before version 10 are not stranded. (Found by a
// review: the first version marked them polled before starting them.)
func TestASetModeThatFailedIsTriedAgain(t *testing.T) {
	t.Parallel()
	f := &fakeFrontend{down: true, polled: map[string]bool{}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	workflowservice.RegisterWorkflowServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	c, err := client.NewLazyClient(client.Options{HostPort: lis.Addr().String()})
	require.NoError(t, err)
	defer c.Close()

	w := &Workers{
		c: c, runQueue: contract.TaskQueue,
		acts:    &activities.Activities{Providers: map[provider.Name]provider.Client{provider.Sendy: nil}},
		tuning:  Tuning{StopTimeout: time.Second},
		limits:  QueueLimits{PerMinute: map[provider.Name]int{provider.Sendy: 60}, Partitions: 1},
		byQueue: map[string]queueWorker{},
	}
	defer w.Stop()
	require.Error(t, w.SetMode(WithOldQueues), "the frontend is down")
	require.Equal(t, OnlyProviderQueues, w.Mode(), "the mode stays the one before")

	f.mu.Lock()
	f.down = false
	f.mu.Unlock()
	require.NoError(t, w.SetMode(WithOldQueues))
	require.Equal(t, WithOldQueues, w.Mode())
	for _, q := range []string{contract.ProviderQueue(contract.TaskQueue, "sendy"), contract.ProviderTaskQueue(contract.TaskQueue, "sendy", contract.PurposeSend), contract.ProviderTaskQueue(contract.TaskQueue, "sendy", contract.PurposeLookup)} {
		require.Eventually(t, func() bool { return f.isPolled(q) }, 5*time.Second, 50*time.Millisecond, q)
	}
}

// A limit too small for the old queues beside the provider queue is still
// accepted: it is safe on the provider queue alone, and the old queues
// are needed only while runs from before version 10 are open (the worker
// says then what to give). Limits of 12 to 15 were accepted before
// version 10. (Found by a review.)
func TestSmallLimitsStillValidate(t *testing.T) {
	t.Parallel()
	for _, perMinute := range []int{12, 15} {
		limits := QueueLimits{PerMinute: map[provider.Name]int{provider.Sendy: perMinute}, Partitions: 4}
		r, err := limits.Rates(provider.Sendy)
		require.NoError(t, err)
		require.LessOrEqual(t, 4*(1+int(math.Floor(61*r.Queue/4))), perMinute, "the worst 60 s on the provider queue alone")
		cfg := Config{Sendy: SendyConfig{BaseURL: "https://sendy", Token: "t"}, IntakeAddress: Off, PlaintextPayloads: true,
			RateLimits: map[provider.Name]int{provider.Sendy: perMinute}}.WithDefaults()
		if err := cfg.Validate(); err != nil {
			require.NotContains(t, err.Error(), "rate-limit", "--sendy-rate-limit=%d", perMinute)
		}
		require.ErrorContains(t, limits.roomForOldQueues(), "--sendy-rate-limit: a rate limit of", "too small beside the old queues")
	}
}
