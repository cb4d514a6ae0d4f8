package integration

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/app"
	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/provider/pace"
	"github.com/acme/smsorch/provider/sendy"
	"github.com/acme/smsorch/starter"
)

// counting counts the requests one worker makes to a provider.
type counting struct {
	provider.Client
	n atomic.Int64
}

func (c *counting) Send(ctx context.Context, req provider.Request) provider.Result {
	c.n.Add(1)
	return c.Client.Send(ctx, req)
}

func (c *counting) Get(ctx context.Context, id string) (provider.Message, error) {
	c.n.Add(1)
	return c.Client.Get(ctx, id)
}

// A burst of Sendy events served by two workers never puts more than
// Sendy's 60 requests into any 60 seconds at the provider, sends and
// status lookups together, and the provider never answers 429: the limit
// holds for the fleet, not per process. It holds by the slots both
// workers take in the ledger (provider/pace), whatever the timing; the
// queue's rate only spreads the work. After its 30th request the second
// worker leaves, and the first one's requests still count the second's.
func TestABurstStaysWithinSendysLimitAcrossTwoWorkers(t *testing.T) {
	t.Parallel()
	const events = 70 // at Sendy's queue's rate (57.1 a minute) this lasts over a minute
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	pol := activities.DefaultPolicy()
	pol.AttemptTimeout = 5 * time.Second
	pol.StatusPollInitial = 2 * time.Second
	// Its own stack: the simulator enforces Sendy's limit, and the worker
	// gives the fleet-wide default (60 a minute).
	one, err := app.Start(ctx, app.Config{
		Dev: true, DataDir: t.TempDir(),
		FrontendAddress: "127.0.0.1:0", UIAddress: "off", SimulatorAddress: "127.0.0.1:0", IntakeAddress: "off",
		Simulator:      simulator.Config{DeliveryDelay: time.Second, Seed: 5},
		AttemptTimeout: pol.AttemptTimeout,
		Policies:       map[provider.Name]activities.Policy{provider.Bird: pol, provider.Sendy: pol},
	}, zap.NewNop())
	require.NoError(t, err)
	t.Cleanup(func() { _ = one.Stop() })
	require.Equal(t, 60, one.Config.RateLimits[provider.Sendy])

	// The second worker of the fleet: its own Sendy client, paced as the
	// app paces a worker's, on the slots of the ledger they share.
	pacer, err := pace.New(one.Ledger, provider.Sendy, one.Config.RateLimits[provider.Sendy])
	require.NoError(t, err)
	sc, err := sendy.New(sendy.Config{BaseURL: one.Sim.URL, Token: logging.Secret(one.Sim.Config().SendyToken), Sender: "SMS", Timeout: pol.AttemptTimeout, Pacer: pacer})
	require.NoError(t, err)
	second := &counting{Client: sc}
	w, err := app.StartWorkers(one.Client, contract.TaskQueue, &activities.Activities{
		Providers: map[provider.Name]provider.Client{provider.Sendy: second},
		Policies:  one.Config.Policies, Ledger: one.Ledger, Logger: zap.NewNop(),
	}, app.QueueLimits{PerMinute: one.Config.RateLimits, Partitions: one.Config.TaskQueuePartitions}, app.Tuning{StopTimeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	// Which worker takes a task is the server's choice: the second took
	// nearly all of them in every run, and once all 73. So the second
	// leaves after its 30th request, as in a rolling deploy, and the
	// first serves the rest within the same minutes, on the slots the
	// second took.
	const secondLeavesAfter = 30
	go func() {
		for second.n.Load() < secondLeavesAfter && ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
		}
		w.Stop()
	}()

	st := starter.New(one.Client)
	base := uniqueID()
	var wg sync.WaitGroup
	errs := make([]error, events)
	for i := 0; i < events; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = st.Send(ctx, starter.Event{Kind: "order", ID: fmt.Sprintf("%s%03d", base, i), Stage: "burst", Provider: "sendy", To: "+972502345678", Text: "Your order has shipped."})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "start of event %d", i)
	}
	begin := time.Now()
	require.Eventually(t, func() bool {
		return len(one.Sim.Messages(simulator.Filter{Provider: "sendy"})) >= events
	}, 5*time.Minute, time.Second, "every event's message reaches Sendy")
	took := time.Since(begin)
	time.Sleep(5 * time.Second) // lookups still going

	reqs := one.Sim.Requests(simulator.Filter{Provider: "sendy"})
	var at []time.Time
	limited := 0
	for _, r := range reqs {
		at = append(at, r.At)
		if r.Status == http.StatusTooManyRequests {
			limited++
		}
	}
	most := pace.MostInAnyWindow(at, time.Minute)
	t.Logf("%d Sendy events: %d requests in %s (the second worker made %d), at most %d in any 60 s, %d answered 429; all sent within %s",
		events, len(reqs), time.Since(begin).Round(time.Second), second.n.Load(), most, limited, took.Round(time.Second))
	require.Len(t, one.Sim.Messages(simulator.Filter{Provider: "sendy"}), events, "one message per event")
	require.LessOrEqual(t, most, 60, "requests in a 60 s window at Sendy")
	require.Zero(t, limited, "429 answers from Sendy")
	require.Positive(t, second.n.Load(), "the second worker served some of the burst")
	require.Less(t, second.n.Load(), int64(len(reqs)), "the first worker served some of the burst")
	require.Greater(t, took, 50*time.Second, "the burst was paced, not sent at once")
}
