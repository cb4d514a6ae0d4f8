package app

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/codec"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/internal/clientopts"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/internal/stackproc"
	"github.com/acme/smsorch/internal/stackspec"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/starter"
)

// envMap is an environment of the test's own (envconfig.EnvLookup).
type envMap map[string]string

func (e envMap) Environ() []string {
	var out []string
	for k, v := range e {
		out = append(out, k+"="+v)
	}
	return out
}

func (e envMap) LookupEnv(k string) (string, bool) { v, ok := e[k]; return v, ok }

// A worker given the wrong payload keys loses no event: the runs
// started through a client that seals with the right key wait (their
// workflow tasks fail, naming the key the worker lacks, and its
// readiness says so), and once a worker with the right key replaces it
// each event is sent exactly once and delivered; a second start of one
// finds it delivered, its key not burned.
func TestAWorkerWithTheWrongKeysLosesNoEvent(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cluster, sim, srv, creds := aClusterAndASimulator(ctx, t, dir)

	right, err := codec.ParseKeys(mustKeyNamed(t, "2026-12"))
	require.NoError(t, err)
	wrong, err := codec.ParseKeys(mustKeyNamed(t, "2026-11"))
	require.NoError(t, err)
	worker := func(ring *codec.Keyring) *App {
		cfg := Config{
			Codec: ring, Sendy: SendyConfig{BaseURL: srv.URL, Token: logging.Secret(creds.SendyToken), Sender: "SMS"},
			RateLimits: map[provider.Name]int{provider.Sendy: 0}, LedgerPath: filepath.Join(dir, "ledger.db"),
			IntakeAddress: Off, HealthAddress: Off, MetricsAddress: Off, CodecServerAddress: Off,
			AttemptTimeout: 3 * time.Second, StopTimeout: 5 * time.Second,
			Policies: map[provider.Name]activities.Policy{provider.Sendy: shortWindowPolicy},
		}
		cfg.temporalEnv = envMap{"TEMPORAL_ADDRESS": cluster.FrontendAddress(), "TEMPORAL_NAMESPACE": "default", "TEMPORAL_CONFIG_FILE": filepath.Join(dir, "no-such-profile.toml")}
		a, err := Start(ctx, cfg.WithDefaults(), zaptest.NewLogger(t))
		require.NoError(t, err)
		return a
	}

	// The senders (the intake, smsctl) seal with the right key.
	opts, err := clientopts.Build(clientopts.Settings{Address: cluster.FrontendAddress(), Namespace: "default", Codec: right})
	require.NoError(t, err)
	c, err := client.DialContext(ctx, opts)
	require.NoError(t, err)
	defer c.Close()
	st := starter.New(c)

	bad := worker(wrong)
	keys := []string{"order-71-shipped", "order-72-shipped", "order-73-shipped"}
	event := func(key string) starter.Event {
		return starter.Event{Key: key, Provider: "sendy", To: "+972502345678", Text: "Order " + key + " has shipped."}
	}
	for _, key := range keys {
		res, err := st.Send(ctx, event(key))
		require.NoError(t, err)
		require.True(t, res.Started)
	}
	// Each run's workflow task fails on the wrong worker, naming the key
	// (in a failure sealed with the worker's own key: its client reads
	// it, and the senders' client still reads the rest of the history);
	// the run itself stays open, and the worker says it is not ready.
	for _, key := range keys {
		var failure string
		require.Eventually(t, func() bool {
			it := bad.Client.GetWorkflowHistory(ctx, key, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				ev, err := it.Next()
				if err != nil {
					return false
				}
				if a := ev.GetWorkflowTaskFailedEventAttributes(); a != nil {
					failure = a.GetFailure().GetMessage()
					return true
				}
			}
			return false
		}, time.Minute, 200*time.Millisecond, "%s: the wrong worker fails its workflow task", key)
		require.Contains(t, failure, `sealed with key "2026-12", which this worker's ring (2026-11) lacks`, key)
		require.Contains(t, eventsOf(ctx, t, c, key), "WorkflowExecutionStarted", "%s: the senders' client reads the history", key)
		d, err := c.DescribeWorkflowExecution(ctx, key, "")
		require.NoError(t, err)
		require.Equal(t, enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, d.GetWorkflowExecutionInfo().GetStatus(), "%s: the run is not failed", key)
	}
	require.Contains(t, bad.health.ready(ctx), "payload keys", "the wrong worker is not ready")
	require.ErrorContains(t, unopenedLately(bad.Config.Codec, time.Now()), `sealed with key "2026-12", which this worker's ring (2026-11) lacks`, "its readiness names the key")
	require.Empty(t, sim.Messages(simulator.Filter{}), "nothing was sent meanwhile")
	require.NoError(t, bad.Stop())

	good := worker(right)
	defer func() { _ = good.Stop() }()
	for _, key := range keys {
		res, err := st.Wait(ctx, key)
		require.NoError(t, err, key)
		require.Equal(t, contract.Delivered, res.State, "%s: %s", key, res.Reason)
		require.Len(t, sim.Messages(simulator.Filter{Key: key}), 1, "%s: sent exactly once", key)
	}
	require.Empty(t, good.health.ready(ctx), "the right worker, having run them, is ready")
	again, err := st.Send(ctx, event(keys[0]))
	require.NoError(t, err)
	require.False(t, again.Started)
	require.Equal(t, contract.Delivered, again.State, "the key is not burned: its event is found delivered")
}

// mustKeyNamed makes a payload key with the id given.
func mustKeyNamed(t *testing.T, id string) string {
	t.Helper()
	k, err := codec.NewKey(id)
	require.NoError(t, err)
	return k
}

// eventsOf lists a run's event types as c reads them.
func eventsOf(ctx context.Context, t *testing.T, c client.Client, key string) []string {
	t.Helper()
	var out []string
	it := c.GetWorkflowHistory(ctx, key, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err, "%s: the history reads", key)
		out = append(out, ev.GetEventType().String())
	}
	return out
}

// shortWindowPolicy is the production-mode tests' Sendy policy: a 16 s
// window, so that an event whose provider is down awaits a decision
// within seconds.
var shortWindowPolicy = activities.Policy{
	ReplayWindow: 16 * time.Second, WindowMargin: 3 * time.Second, AttemptTimeout: 3 * time.Second,
	InitialBackoff: 200 * time.Millisecond, MaxBackoff: time.Second,
	LateEffectHorizon: activities.ProviderLockLifetime + 3*time.Second,
	StatusPollInitial: 100 * time.Millisecond, StatusPollMax: 200 * time.Millisecond,
}

// aClusterAndASimulator starts a Temporal dev cluster in dir and the
// provider simulator behind an HTTP server, both stopped when the test
// ends. Outside dev mode the simulator's default credentials are
// refused, so it takes fresh ones.
func aClusterAndASimulator(ctx context.Context, t *testing.T, dir string) (stackspec.Embedded, *simulator.Server, *httptest.Server, simulator.Credentials) {
	t.Helper()
	cluster, err := stackproc.Start(ctx, stackspec.Request{FrontendAddress: "127.0.0.1:0", UIAddress: Off, DataDir: filepath.Join(dir, "cluster"), WithoutSearchAttributes: true}, zap.NewNop())
	require.NoError(t, err)
	t.Cleanup(func() { _ = cluster.Stop() })
	creds := simulator.NewCredentials()
	sim, err := simulator.New(simulator.Config{DeliveryDelay: 100 * time.Millisecond, SendyToken: creds.SendyToken})
	require.NoError(t, err)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	return cluster, sim, srv, creds
}
