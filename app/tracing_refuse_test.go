package app

import (
	"context"
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/codec"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/internal/clientopts"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/starter"
)

// A decision signal whose payloads the worker cannot open (smsctl sealed
// it under a key the workers do not have yet, mid-rotation) must be
// refused in the run's timeline while the run keeps waiting, as
// codec/refuse_test.go and TestStartAgainstAnExistingCluster require.
// With tracing on in the sender, the signal also carries a
// "_tracer-data" header sealed under that key; the worker's refusing
// codec marks it, and the SDK's tracing interceptor fails to read it.
func TestAnUnopenableTraceHeaderDoesNotWedgeTheRun(t *testing.T) {
	tp := sdktrace.NewTracerProvider() // as tracing.Setup does when OTEL_EXPORTER_OTLP_ENDPOINT is set
	previous := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(previous) })

	ctx := context.Background()
	dir := t.TempDir()
	cluster, sim, srv, creds := aClusterAndASimulator(ctx, t, dir)

	t.Setenv("TEMPORAL_ADDRESS", cluster.FrontendAddress())
	t.Setenv("TEMPORAL_NAMESPACE", "default")
	t.Setenv("TEMPORAL_CONFIG_FILE", filepath.Join(dir, "no-such-profile.toml"))
	t.Setenv(EnvSendyToken, creds.SendyToken)
	oldKey, err := codec.NewKey("old-1")
	require.NoError(t, err)
	t.Setenv(codec.EnvKeys, oldKey)
	var cfg Config
	cfg.RegisterFlags(flag.NewFlagSet("worker", flag.ContinueOnError))
	cfg.Sendy.BaseURL = srv.URL
	cfg.RateLimits = map[provider.Name]int{provider.Sendy: 0}
	cfg.LedgerPath = filepath.Join(dir, "ledger.db")
	cfg.IntakeAddress = Off
	cfg.AttemptTimeout = 3 * time.Second
	cfg.Policies[provider.Sendy] = shortWindowPolicy
	require.NoError(t, sim.AddFault(simulator.Fault{Kind: simulator.Unavailable, Provider: "sendy", Key: "order-9-shipped", Rate: 1}))
	a, err := Start(ctx, cfg, zap.NewNop()) // outside dev mode: refuses unsealed payloads
	require.NoError(t, err)
	defer func() { _ = a.Stop() }()

	st := starter.New(a.Client)
	_, err = st.Send(ctx, starter.Event{Key: "order-9-shipped", Provider: "sendy", To: "+972502345678", Text: "Order 9 has shipped."})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		s, err := st.Status(ctx, "order-9-shipped")
		return err == nil && s.State == contract.AwaitingDecision
	}, 90*time.Second, 250*time.Millisecond)

	// smsctl with the next key first (a rotation under way): a client
	// from clientopts, so with the tracing interceptor.
	newKey, err := codec.NewKey("new-2")
	require.NoError(t, err)
	ring, err := codec.ParseKeys(newKey)
	require.NoError(t, err)
	opts, err := clientopts.Build(clientopts.Settings{Address: cluster.FrontendAddress(), Codec: ring})
	require.NoError(t, err)
	rotated, err := client.Dial(opts)
	require.NoError(t, err)
	defer rotated.Close()
	require.NoError(t, starter.New(rotated).Signal(ctx, "order-9-shipped", contract.Decision{Action: contract.ActionCancel, Reason: "test", By: "tester"}))

	refused := func() bool {
		s, err := st.Status(ctx, "order-9-shipped")
		if err != nil {
			return false
		}
		for _, e := range s.Timeline {
			if strings.Contains(e.Text, "refused a cancel signal") {
				return s.State == contract.AwaitingDecision
			}
		}
		return false
	}
	ok := assertEventually(refused, 30*time.Second)
	if !ok {
		it := a.Client.GetWorkflowHistory(ctx, "order-9-shipped", "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		failed := 0
		for it.HasNext() {
			ev, err := it.Next()
			require.NoError(t, err)
			if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED {
				failed++
				if failed == 1 {
					t.Logf("event %d WorkflowTaskFailed: %s", ev.GetEventId(), ev.GetWorkflowTaskFailedEventAttributes().GetFailure().GetMessage())
				}
			}
		}
		_, qerr := st.Status(ctx, "order-9-shipped")
		t.Logf("state query: %v", qerr)
		t.Fatalf("the signal was not refused in the timeline within 30 s; %d WorkflowTaskFailed events in the history", failed)
	}
}

func assertEventually(f func() bool, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if f() {
			return true
		}
		time.Sleep(250 * time.Millisecond)
	}
	return false
}
