package drill

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/acme/smsorch/internal/procs"
)

// Main is the smsdrill command: flags, one drill per seed, the table and
// the JSON. It returns the exit code: 0 when every drill kept every
// promise, 1 on a violation, 2 on bad flags.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("smsdrill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	seeds := fs.String("seed", "clock", `comma-separated seeds, one drill each; "clock" takes one from the clock (printed, so a failure can be replayed)`)
	fs.IntVar(&cfg.Events, "events", 1000, "events per drill, half per provider")
	fs.IntVar(&cfg.Kills, "kills", 3, "SIGKILLs of the worker, one every half replay window from the start, each followed by a restart")
	fs.DurationVar(&cfg.Window, "window", 40*time.Second, "the providers' replay window (simulator and worker)")
	fs.Float64Var(&cfg.FaultRate, "fault-rate", 0.01, "share of send requests that get each fault kind")
	fs.Float64Var(&cfg.DownShare, "down-share", 0.05, "share of events whose provider stays down past the window")
	fs.Float64Var(&cfg.LateShare, "late-share", 0.03, "share of events whose first attempt takes effect unstored and whose retries are rate limited past the window")
	fs.Float64Var(&cfg.SecondKeyShare, "second-key-share", 0.03, "share of events whose message fails and whose resend's outcome stays unknown with a message behind it")
	fs.Float64Var(&cfg.FailoverShare, "failover-share", 0.04, "share of events whose provider answers \"not executed\" for the whole run, with the other provider as their fallback")
	fs.Float64Var(&cfg.RotateShare, "rotate-share", 0.03, "share of events whose first attempt takes effect unstored and whose second is refused 401, as after a credential rotation")
	fs.Float64Var(&cfg.ResetShare, "reset-share", 0.04, "share of events whose run an operator resets to a workflow task drawn by the seed")
	fs.IntVar(&cfg.SendyBurst, "sendy-burst", 0, "add this many Sendy events at once, with Sendy's limit of 60 a minute on at the simulator and the workers' default fleet limit")
	fs.IntVar(&cfg.Concurrency, "concurrency", 32, "events started at once")
	fs.BoolVar(&cfg.Cluster, "cluster", false, "the production shape: two Temporal servers as one cluster on PostgreSQL and two workers outside dev mode on the PostgreSQL ledger; the first kill takes a server down for good, the others a worker in turn (needs -postgres)")
	fs.StringVar(&cfg.Postgres, "postgres", "", "keep the worker's ledger on this PostgreSQL server (a fresh database per drill), e.g. postgres://postgres@127.0.0.1:5432/postgres")
	dir := fs.String("dir", "", "working directory for state and logs (default: a new temporary directory, kept on failure)")
	jsonOut := fs.String("json", "", "also write the summaries and every event's outcome as JSON to this file")
	workerBin := fs.String("worker-bin", "", "a built worker binary (default: go build -tags nodevstack ./worker, the image's)")
	serverBin := fs.String("server-bin", "", "a built binary with the embedded Temporal, for the servers and --dev (default -worker-bin when given, else go build ./worker)")
	simBin := fs.String("sim-bin", "", "a built simulator binary (default: go build ./cmd/smssim)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	list, err := parseSeeds(*seeds)
	if err != nil || cfg.Events < 2 || cfg.Kills < 0 {
		fmt.Fprintf(stderr, "smsdrill: %v\n", orText(err, "give at least 2 events and 0 or more kills"))
		return 2
	}
	if cfg.Cluster && cfg.Postgres == "" {
		fmt.Fprintln(stderr, "smsdrill: -cluster needs -postgres: the cluster keeps Temporal and the ledger on PostgreSQL, e.g. -postgres postgres://postgres@127.0.0.1:5432/postgres")
		return 2
	}
	if *dir == "" {
		if *dir, err = os.MkdirTemp("", "smsdrill-"); err != nil {
			fmt.Fprintln(stderr, "smsdrill:", err)
			return 1
		}
	}
	if cfg.Kills == 0 {
		cfg.Kills = -1 // Config's zero means the default; -kills 0 means none
	}
	cfg.Progress = stderr
	if cfg.Bins, err = procs.Ensure(ctx, procs.Binaries{Worker: *workerBin, Server: *serverBin, Simulator: *simBin}, filepath.Join(*dir, "bin"), stderr); err != nil {
		fmt.Fprintln(stderr, "smsdrill:", err)
		return 1
	}
	fmt.Fprintf(stdout, "smsdrill: seeds %s, %d events each, working directory %s\n", joinSeeds(list), cfg.Events, *dir)
	type drillJSON struct {
		Summary    Summary   `json:"summary"`
		Violations []string  `json:"violations"`
		Events     []Outcome `json:"events"`
	}
	var all []drillJSON
	failed, passedSeeds := false, 0
	for _, seed := range list {
		c := cfg
		c.Seed = seed
		c.Dir = filepath.Join(*dir, fmt.Sprintf("seed-%d", seed))
		start := time.Now()
		s, outs, err := Run(ctx, c)
		if err != nil {
			fmt.Fprintf(stderr, "smsdrill: seed %d: %v (logs in %s)\n", seed, err, c.Dir)
			return 1
		}
		fmt.Fprintf(stdout, "\n== seed %d (%s)\n", seed, time.Since(start).Round(time.Second))
		s.Print(stdout)
		v := s.Violations()
		for _, line := range v {
			fmt.Fprintln(stdout, "VIOLATION:", line)
		}
		failed = failed || len(v) > 0
		if len(v) == 0 {
			passedSeeds++
		}
		all = append(all, drillJSON{Summary: s, Violations: nonNil(v), Events: outs})
	}
	summaries := make([]Summary, len(all))
	for i, d := range all {
		summaries[i] = d.Summary
	}
	b, _ := json.MarshalIndent(map[string]any{"summaries": summaries}, "", "  ")
	fmt.Fprintf(stdout, "\n%s\n", b)
	if *jsonOut != "" {
		full, _ := json.MarshalIndent(all, "", "  ")
		if err := os.WriteFile(*jsonOut, full, 0o644); err != nil {
			fmt.Fprintln(stderr, "smsdrill:", err)
			return 1
		}
	}
	if failed {
		fmt.Fprintf(stdout, "smsdrill: FAILED; replay with -seed %s; logs in %s\n", joinSeeds(list), *dir)
	} else {
		fmt.Fprintln(stdout, "smsdrill: every promise kept: no silent duplicate, no lost event, no unknown message, no unreconciled resend")
		_ = os.RemoveAll(*dir)
	}
	// One line per drill run, in the form test runners close with.
	fmt.Fprintf(stdout, "drills: %d passed, %d failed\n", passedSeeds, len(list)-passedSeeds)
	if failed {
		return 1
	}
	return 0
}

func parseSeeds(s string) ([]uint64, error) {
	var out []uint64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "clock" {
			out = append(out, uint64(time.Now().UnixNano()%1_000_000_000))
			continue
		}
		n, err := strconv.ParseUint(part, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("seed %q is neither a number nor \"clock\"", part)
		}
		out = append(out, n)
	}
	return out, nil
}

func joinSeeds(seeds []uint64) string {
	parts := make([]string, len(seeds))
	for i, s := range seeds {
		parts[i] = strconv.FormatUint(s, 10)
	}
	return strings.Join(parts, ",")
}

func orText(err error, text string) string {
	if err != nil {
		return err.Error()
	}
	return text
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
