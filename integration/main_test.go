// Package integration runs the orchestrator as a user does: a real Temporal
// server (the embedded dev stack on SQLite), the real worker, the provider
// simulator and the SQLite ledger, all started by app.Start in dev mode.
// Every test counts the messages the simulator created.
package integration

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/app"
	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/internal/stackproc"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/sms"
)

// The shortened policy: a 12 s replay window with a 3 s margin, so a
// provider that stays down reaches reconciliation in about 9 s.
var policy = activities.Policy{
	ReplayWindow:    12 * time.Second,
	WindowMargin:    3 * time.Second,
	AttemptTimeout:  time.Second,
	InitialBackoff:  200 * time.Millisecond,
	MaxBackoff:      time.Second,
	InProgressDelay: 300 * time.Millisecond,
	// The first lookup comes after the simulator's delivery delay (300
	// ms, below): a Bird run's Send finds its message delivered when it
	// looks first (activities.FirstLook), as a real one mostly does.
	StatusPollInitial: 400 * time.Millisecond,
	StatusPollMax:     800 * time.Millisecond,
	TrackingLimit:     30 * time.Second,
	ReconcileBudget:   10 * time.Second,
	DecisionDeadline:  2 * time.Minute,
	// A hung attempt (the simulator's hang faults here wait 4 s, well past
	// a retry even on a loaded machine) can take effect up to this long
	// after it began; the worker accepts no less than Bird's real lock
	// plus the attempt timeout.
	LateEffectHorizon: activities.ProviderLockLifetime + time.Second,
	ReconcileRetry:    2 * time.Second,
}

// pacedPolicy is Sendy's: its lookups are treated as paced, as a fleet
// with its rate limit has them (the suite runs it without, so Sendy's
// limit holds no test back), and so the suite tracks delivery both ways:
// Bird's first wait is the lookup activity's first attempt, Sendy's a
// timer.
var pacedPolicy = func() activities.Policy { p := policy; p.LookupsPaced = true; return p }()

var stack *app.App

func TestMain(m *testing.M) {
	flag.Parse()
	setParallelUnlessGiven(parallelTests)
	os.Exit(run(m))
}

// parallelTests is how many of this package's tests run at once unless
// -parallel says otherwise. go test's default is GOMAXPROCS (2 on the
// machines this project is tested on), but these tests spend most of
// their time waiting on the shortened policy's timers (replay windows,
// backoffs, tracking, decision deadlines), not on the CPU: on 2 cores
// the package took 583 s at 2 and 256 s at 6, with 2 min 20 s of CPU.
const parallelTests = 6

// setParallelUnlessGiven sets -test.parallel to n when the command line
// did not set it.
func setParallelUnlessGiven(n int) {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}

func run(m *testing.M) int {
	// The Temporal server runs in a child process built without the race
	// detector (package stackproc); the worker, in this one, with it. Its
	// build does not count against the stack's start below.
	if err := stackproc.Prepare(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	app.UseEmbedded(stackproc.Start)
	dir, err := os.MkdirTemp("", "smsorch-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	logPath := filepath.Join(os.TempDir(), "smsorch-integration.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = logFile.Close() }()
	log, err := logging.New(logging.Options{Format: logging.FormatJSON, Level: "debug", Sink: zapcore.AddSync(logFile)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stack, err = app.Start(ctx, app.Config{
		Dev: true, DataDir: dir,
		FrontendAddress: "127.0.0.1:0", UIAddress: "127.0.0.1:0", SimulatorAddress: "127.0.0.1:0", IntakeAddress: "127.0.0.1:0",
		Simulator:      simulator.Config{DeliveryDelay: 300 * time.Millisecond, SendyRateLimit: -1, Seed: 11},
		AttemptTimeout: policy.AttemptTimeout,
		Policies:       map[provider.Name]activities.Policy{provider.Bird: policy, provider.Sendy: pacedPolicy},
		// The simulator above has no Sendy limit; neither has the fleet.
		RateLimits: map[provider.Name]int{provider.Sendy: 0},
	}, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start the dev app:", err)
		return 1
	}
	code := m.Run()
	if err := stack.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop the dev app:", err)
	}
	if code != 0 {
		fmt.Fprintln(os.Stderr, "the orchestrator's log is in", logPath)
	}
	return code
}

var seq atomic.Int64

// uniqueID returns an order id no other test (or earlier run) uses.
func uniqueID() string {
	return fmt.Sprintf("%d%03d", time.Now().UnixMilli()%1_000_000, seq.Add(1))
}

// newKey returns an event key no other test uses.
func newKey(stage string) string { return "order-" + uniqueID() + "-" + stage }

func sim() *simulator.Listening { return stack.Sim }

func messages(p provider.Name, key string) []simulator.Message {
	return sim().Messages(simulator.Filter{Provider: string(p), Key: key})
}

func fault(t *testing.T, f simulator.Fault) {
	t.Helper()
	require.NoError(t, sim().AddFault(f))
}

func input(p provider.Name, key string) contract.Input {
	to := "+31612345678"
	if p == provider.Sendy {
		to = "+972502345678"
	}
	return contract.Input{Key: key, Provider: string(p), To: to, Text: "Order " + key + " has shipped."}
}

// start starts the event's run the way the starter does: id = key,
// REJECT_DUPLICATE and USE_EXISTING.
func start(ctx context.Context, in contract.Input) (client.WorkflowRun, error) {
	return startOn(ctx, stack.Client, in)
}

// startOn is start through another stack's client.
func startOn(ctx context.Context, c client.Client, in contract.Input) (client.WorkflowRun, error) {
	return c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: in.Key, TaskQueue: contract.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            "SMS " + in.Key + " to " + sms.MaskPhone(in.To) + " via " + in.Provider,
		// Without it ExecuteWorkflow hides a refused start behind a handle to the old run.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
	}, contract.WorkflowName, in)
}

// result waits for the run and returns its Result, whatever way it ended.
func result(t *testing.T, run client.WorkflowRun) (contract.Result, error) {
	t.Helper()
	return resultWithin(t, run, time.Minute)
}

// resultWithin is result with another bound on the wait.
func resultWithin(t *testing.T, run client.WorkflowRun, within time.Duration) (contract.Result, error) {
	t.Helper()
	return resultOn(t, stack.Client, run, within)
}

// resultOn is resultWithin for a run of another stack, whose client c
// can query it.
func resultOn(t *testing.T, c client.Client, run client.WorkflowRun, within time.Duration) (contract.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var res contract.Result
	err := run.Get(ctx, &res)
	if err != nil {
		r, ok := contract.ResultFromError(err)
		require.True(t, ok, "the run ended without a Result: %v%s", err, whereItStands(c, run.GetID()))
		res = r
	}
	return res, err
}

// whereItStands is what a run that did not end in time says of itself:
// its state and timeline, for the failure message.
func whereItStands(c client.Client, key string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := queryState(ctx, c, key)
	if err != nil {
		return fmt.Sprintf("\n(its state could not be queried: %v)", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nit stands %s; its timeline:", s.State)
	for _, e := range s.Timeline {
		fmt.Fprintf(&b, "\n  %s %s: %s", e.At.UTC().Format("15:04:05.000"), e.Kind, e.Text)
	}
	return b.String()
}

// queryState queries the run's state through c.
func queryState(ctx context.Context, c client.Client, key string) (contract.Status, error) {
	var s contract.Status
	v, err := c.QueryWorkflow(ctx, key, "", contract.QueryState)
	if err == nil {
		err = v.Get(&s)
	}
	return s, err
}

// status queries the run's state.
func status(t *testing.T, key string) contract.Status {
	t.Helper()
	return statusOn(t, stack.Client, key)
}

// statusOn is status for a run of another stack, whose client is c.
func statusOn(t *testing.T, c client.Client, key string) contract.Status {
	t.Helper()
	s, err := queryState(context.Background(), c, key)
	require.NoError(t, err)
	return s
}

// awaitState waits for the run to reach a state.
func awaitState(t *testing.T, key string, want contract.State, within time.Duration) contract.Status {
	t.Helper()
	return awaitStateOn(t, stack.Client, key, want, within)
}

// awaitStateOn is awaitState for a run of another stack, whose client is c.
func awaitStateOn(t *testing.T, c client.Client, key string, want contract.State, within time.Duration) contract.Status {
	t.Helper()
	var s contract.Status
	if !assert.Eventually(t, func() bool {
		s = statusOn(t, c, key)
		return s.State == want
	}, within, 100*time.Millisecond) {
		require.FailNow(t, fmt.Sprintf("run %s never reached %s within %s%s", key, want, within, whereItStands(c, key)))
	}
	return s
}

// ownStack starts a dev stack of the test's own, stopped when the test
// ends, whose two providers follow pol. A test whose premise is that its
// first attempt runs within the replay window takes one with a window
// wider than the shared stack's 12 s: on a loaded machine the shared
// server has been seen to dispatch a first Send more than 9 s late.
func ownStack(t *testing.T, pol activities.Policy, seed uint64) *app.App {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	own, err := app.Start(ctx, app.Config{
		Dev: true, DataDir: t.TempDir(),
		FrontendAddress: "127.0.0.1:0", UIAddress: app.Off, SimulatorAddress: "127.0.0.1:0", IntakeAddress: app.Off,
		Simulator:      simulator.Config{DeliveryDelay: 300 * time.Millisecond, SendyRateLimit: -1, Seed: seed},
		AttemptTimeout: pol.AttemptTimeout,
		Policies:       map[provider.Name]activities.Policy{provider.Bird: pol, provider.Sendy: pol},
		RateLimits:     map[provider.Name]int{provider.Sendy: 0},
	}, zap.NewNop())
	require.NoError(t, err)
	t.Cleanup(func() { _ = own.Stop() })
	return own
}

func isAlreadyStarted(err error) bool {
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	return errors.As(err, &already)
}
