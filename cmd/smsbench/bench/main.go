package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/acme/smsorch/app"
	"github.com/acme/smsorch/codec"
	"github.com/acme/smsorch/internal/clientopts"
	"github.com/acme/smsorch/internal/procs"
)

// Main is smsbench's command line: the benchmark, or one of its child
// roles (-role bare-worker, -role direct). It returns the exit code: 1
// when a run fails or a smoke check finds a row missing.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if err := runMain(ctx, args, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "smsbench:", err)
		return 1
	}
	return 0
}

func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("smsbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	fs.IntVar(&cfg.N, "n", 1000, "events (runs) per scenario")
	fs.IntVar(&cfg.Concurrency, "concurrency", 64, "starts in flight at once")
	backends := fs.String("backends", "sqlite,postgres", "the Temporal server's persistence, measured in turn: sqlite, postgres")
	fs.StringVar(&cfg.Postgres, "postgres", "postgres://postgres@127.0.0.1:5432/postgres", "PostgreSQL server for the postgres backend (a database is made for each run and dropped after)")
	fs.IntVar(&cfg.Await, "await", 2000, "runs left awaiting a decision for the memory rows, per cache size (0: none); more than the smallest cache, or the rows cannot differ")
	caches := fs.String("cache-sizes", "10000,1000", "sticky cache sizes of the memory rows")
	fs.IntVar(&cfg.SendyEvents, "sendy-events", 330, "Sendy events of the rate-limit row, a backlog of sends for over 5 minutes at the limit (0: none)")
	fs.DurationVar(&cfg.SendyFor, "sendy-for", 7*time.Minute, "how long the rate-limit row runs at most")
	fs.DurationVar(&cfg.StatusPoll, "status-poll", time.Second, "the workers' first wait before a delivery-status lookup (the direct loop's too)")
	fs.IntVar(&cfg.StickyCache, "sticky-cache", 0, "every worker's --sticky-cache (0: the worker's default)")
	fs.IntVar(&cfg.WorkflowPollers, "workflow-pollers", 0, "every worker's --workflow-pollers (0: the worker's default)")
	fs.IntVar(&cfg.ActivityPollers, "activity-pollers", 0, "every worker's --activity-pollers (0: the worker's default)")
	fs.StringVar(&cfg.Dir, "dir", "", "directory for the processes' logs and state (default a new temporary one)")
	fs.StringVar(&cfg.Bins.Worker, "worker-bin", "", "the worker program (default: built from this module with -tags nodevstack, as the image's)")
	fs.StringVar(&cfg.Bins.Server, "server-bin", "", "the program that runs the Temporal server (--server-only; default -worker-bin when given, else built from this module)")
	fs.StringVar(&cfg.Bins.Simulator, "sim-bin", "", "the simulator program (default: built from this module)")
	fs.BoolVar(&cfg.SkipThroughput, "skip-throughput", false, "leave out bare, ours, ours-3x and direct (measure only memory and the Sendy pace)")
	loads := fs.String("open-loads", "0.25,0.5,0.75", "open-loop arrival rates, as shares of bare Temporal's saturation rate in the same run (\"\": no open loop)")
	fs.Float64Var(&cfg.OpenRate, "open-rate", 10, "a fixed open-loop arrival rate, events a second, beside the shares (0: none)")
	fs.DurationVar(&cfg.OpenFor, "open-for", 30*time.Second, "how long events arrive in each open-loop scenario")
	fs.Float64Var(&cfg.IntakeFrom, "intake-from", 20, "the intake's first rate of signed posts a second; each step is 1.5 times the last")
	fs.DurationVar(&cfg.IntakeFor, "intake-for", 10*time.Second, "how long each step of the intake's load runs (0: no intake rows)")
	jsonOut := fs.String("json", "", "also write the report as JSON to this file")
	role := fs.String("role", "", "internal: run as the bare worker (bare-worker), the direct loop (direct) or the intake (intake)")
	addr := fs.String("addr", "", "internal (intake): the address to serve on")
	var d DirectConfig
	fs.StringVar(&d.SimURL, "sim", "", "internal (direct): the simulator's URL")
	fs.StringVar(&d.Prefix, "prefix", "", "internal (direct): the events' id prefix")
	out := fs.String("out", "", "internal (direct): where to write the result")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	switch *role {
	case "bare-worker":
		return runBareWorker(ctx, cfg)
	case "direct":
		d.N, d.Conc, d.StatusPoll, d.MaxAttempts = cfg.N, cfg.Concurrency, cfg.StatusPoll, 20
		f, err := os.Create(*out)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		return RunDirect(ctx, d, f)
	case "intake":
		return RunIntake(ctx, *addr)
	case "":
	default:
		return fmt.Errorf("unknown -role %q: it is internal to the benchmark", *role)
	}
	if cfg.N < 1 || cfg.Concurrency < 1 {
		return fmt.Errorf("-n %d and -concurrency %d must be at least 1", cfg.N, cfg.Concurrency)
	}
	for _, b := range strings.Split(*backends, ",") {
		b = strings.TrimSpace(b)
		if b != BackendSQLite && b != BackendPostgres {
			return fmt.Errorf("unknown backend %q: use sqlite, postgres or both (-backends sqlite,postgres)", b)
		}
		cfg.Backends = append(cfg.Backends, b)
	}
	for _, s := range strings.Split(*caches, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("-cache-sizes: %q is not a positive number of runs", s)
		}
		cfg.CacheSizes = append(cfg.CacheSizes, n)
	}
	for _, s := range strings.Split(*loads, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f <= 0 || f > 1 {
			return fmt.Errorf("-open-loads: %q is not a share of bare's rate between 0 and 1 (0.5 is half)", s)
		}
		cfg.OpenLoads = append(cfg.OpenLoads, f)
	}
	if len(cfg.OpenLoads) > 0 && cfg.OpenFor < time.Second {
		return fmt.Errorf("-open-for %s: give the open loop at least 1s", cfg.OpenFor)
	}
	if cfg.IntakeFor > 0 && (cfg.IntakeFor < time.Second || cfg.IntakeFrom <= 0) {
		return fmt.Errorf("-intake-for %s and -intake-from %g: give each step at least 1s and a rate above 0 (or -intake-for 0 for no intake rows)", cfg.IntakeFor, cfg.IntakeFrom)
	}
	var err error
	if cfg.Self, err = os.Executable(); err != nil {
		return err
	}
	if cfg.Dir == "" {
		if cfg.Dir, err = os.MkdirTemp("", "smsbench-"); err != nil {
			return err
		}
	}
	cfg.Log = stderr
	if cfg.Bins, err = procs.Ensure(ctx, cfg.Bins, filepath.Join(cfg.Dir, "bin"), stderr); err != nil {
		return err
	}
	rep, err := Run(ctx, cfg)
	if err != nil {
		return err
	}
	rep.Print(stdout)
	if *jsonOut != "" {
		b, err := json.MarshalIndent(struct {
			Report
			Targets []Target `json:"targets"`
		}{rep, rep.Targets()}, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	return rep.Check(cfg)
}

// runBareWorker is the -role bare-worker child: the bare workflow's
// worker, with the orchestrator worker's client and tuning, until SIGTERM.
func runBareWorker(ctx context.Context, cfg Config) error {
	opts, err := childClientOptions()
	if err != nil {
		return err
	}
	return RunBareWorker(ctx, opts, app.Tuning{
		StopTimeout: app.DefaultStopTimeout, StickyCacheSize: cfg.StickyCache,
		WorkflowPollers: cfg.WorkflowPollers, ActivityPollers: cfg.ActivityPollers,
	})
}

// childClientOptions are a child process's client options, as the
// worker builds them: Temporal's address and the payload keys from the
// environment the bench gave it.
func childClientOptions() (client.Options, error) {
	kr, err := codec.FromEnv(os.Getenv)
	if err != nil {
		return client.Options{}, err
	}
	return clientopts.Build(clientopts.Settings{Env: envconfig.EnvLookupOS, Logger: quietLogger(), Codec: kr})
}
