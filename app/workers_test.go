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

// fakeWorkers are provider workers (one for each provider of limits,
// with its limit) against a fake frontend, down at first when down.
func fakeWorkers(t *testing.T, down bool, limits map[provider.Name]int, partitions int) (*Workers, *fakeFrontend) {
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
	providers := map[provider.Name]provider.Client{}
	for p := range limits {
		providers[p] = nil
	}
	w := &Workers{
		c: c, runQueue: contract.TaskQueue,
		acts:    &activities.Activities{Providers: providers},
		tuning:  Tuning{StopTimeout: time.Second},
		limits:  QueueLimits{PerMinute: limits, Partitions: partitions},
		byQueue: map[string]queueWorker{},
	}
	t.Cleanup(w.Stop)
	return w, f
}

// A change of mode that failed (the frontend refused a poller's start)
// leaves the mode as it was, and the watcher's next try polls the old
// queues: runs from before version 10 are not stranded. (Found by a
// review: the first version marked them polled before starting them.)
func TestASetModeThatFailedIsTriedAgain(t *testing.T) {
	t.Parallel()
	w, f := fakeWorkers(t, true, map[provider.Name]int{provider.Sendy: 60}, 1)
	_, err := w.SetMode(WithOldQueues)
	require.Error(t, err, "the frontend is down")
	require.Equal(t, WithOldQueues, w.Mode(), "a change toward the old queues that failed midway counts as made: the way back waits")

	f.mu.Lock()
	f.down = false
	f.mu.Unlock()
	_, err = w.SetMode(WithOldQueues)
	require.NoError(t, err)
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
		w := &Workers{acts: &activities.Activities{Providers: map[provider.Name]provider.Client{provider.Sendy: nil}}, limits: limits}
		rates, err := w.rates()
		require.ErrorIs(t, err, errNoRoom, "too small beside the old queues")
		require.ErrorContains(t, err, "--sendy-rate-limit: a rate limit of")
		require.Equal(t, rates[0].whole, rates[0].shared, "the provider queue keeps its whole rate")
	}
}

// A provider whose limit leaves no room for the old queues keeps its
// whole rate, and says so; the old queues of another provider are polled
// all the same, so its old runs are not stranded. (Found by a review.)
func TestALimitWithNoRoomStrandsNoOtherProvider(t *testing.T) {
	t.Parallel()
	w, _ := fakeWorkers(t, false, map[provider.Name]int{provider.Sendy: 12, provider.Bird: 0}, 4)
	noRoom, err := w.SetMode(WithOldQueues)
	require.NoError(t, err)
	require.ErrorIs(t, noRoom, errNoRoom)
	require.ErrorContains(t, noRoom, "sendy")
	require.Equal(t, WithOldQueues, w.Mode())
	for _, purpose := range []string{contract.PurposeSend, contract.PurposeLookup} {
		_, ok := w.polls(contract.ProviderTaskQueue(contract.TaskQueue, "bird", purpose))
		require.True(t, ok, "bird's old %s queue", purpose)
		_, ok = w.polls(contract.ProviderTaskQueue(contract.TaskQueue, "sendy", purpose))
		require.False(t, ok, "sendy's old %s queue: no room", purpose)
	}
	whole, err := QueueLimits{PerMinute: w.limits.PerMinute, Partitions: 4}.Rates(provider.Sendy)
	require.NoError(t, err)
	rate, ok := w.polls(contract.ProviderQueue(contract.TaskQueue, "sendy"))
	require.True(t, ok)
	require.Equal(t, whole.Queue, rate, "sendy's queue keeps its whole rate")
}

// The watcher's steps between the modes, count by count (0: no old run
// open, 1: some). A review found the way up left Lowered one check after
// the first count that saw old runs, where the process had entered
// Lowered for another reason (at start, after old runs had just ended):
// a peer that counted a moment later could still be at the whole rate.
func TestTheWatchersStepsWaitForThreeAgreeingCounts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		start  QueueMode
		counts []int64
		want   []QueueMode // the mode after each count
	}{
		{"old runs turn up", OnlyProviderQueues, []int64{1, 1, 1, 1},
			[]QueueMode{Lowered, Lowered, WithOldQueues, WithOldQueues}},
		{"the last old run ends", WithOldQueues, []int64{0, 0, 0, 0},
			[]QueueMode{Lowered, Lowered, OnlyProviderQueues, OnlyProviderQueues}},
		{"started lowered, old runs turn up after the first count", Lowered, []int64{0, 1, 1, 1},
			[]QueueMode{Lowered, Lowered, Lowered, WithOldQueues}},
		{"started lowered, none open", Lowered, []int64{0, 0, 0, 0},
			[]QueueMode{Lowered, Lowered, OnlyProviderQueues, OnlyProviderQueues}},
		{"counts that flip keep it lowered", OnlyProviderQueues, []int64{1, 0, 1, 0, 0, 0},
			[]QueueMode{Lowered, Lowered, Lowered, Lowered, Lowered, OnlyProviderQueues}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st modeSteps
			mode := tc.start
			for i, n := range tc.counts {
				next := st.next(mode, n)
				st.reached(mode, next)
				mode = next
				require.Equal(t, tc.want[i], mode, "after count %d (%d open)", i+1, n)
			}
		})
	}
}
