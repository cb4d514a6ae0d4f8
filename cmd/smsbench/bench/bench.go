// Package bench measures the orchestrator beside bare Temporal and a
// plain HTTP loop, on one machine in one run, against the same Temporal
// server and persistence (cmd/smsbench). Every process it measures is a
// child of its own: the embedded Temporal server, the worker of each
// scenario (fresh, so its peak memory is the scenario's), the simulators.
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/internal/procs"
	"github.com/acme/smsorch/starter"
)

// Backends the server can run on.
const (
	BackendSQLite   = "sqlite"
	BackendPostgres = "postgres"
)

// The simulators' settings: delivery right after acceptance; Sendy's
// published limit on the simulator of the Sendy row.
const (
	DeliveryDelay = 5 * time.Millisecond
	SendyLimit    = 60
)

// Config is one benchmark run's.
type Config struct {
	// N is the events (runs) of each throughput scenario.
	N int
	// Concurrency is how many starts are in flight at once.
	Concurrency int
	// Backends are the server's persistence, each measured in turn.
	Backends []string
	// Postgres is the PostgreSQL server for the postgres backend.
	Postgres string
	// Await is the runs left awaiting a decision for the memory rows, one
	// set per sticky cache size in CacheSizes (0: no memory rows).
	Await      int
	CacheSizes []int
	// SendyEvents are the Sendy events of the rate-limit row, measured
	// for at most SendyFor (0 events: no row).
	SendyEvents int
	SendyFor    time.Duration
	// StatusPoll is the workers' first wait before a status lookup.
	StatusPoll time.Duration
	// Pollers and cache of every worker (the orchestrator's and the bare
	// one alike); 0 is the default of the worker's flags.
	StickyCache, WorkflowPollers, ActivityPollers int
	// SkipThroughput leaves out the throughput scenarios (to measure
	// only memory or the Sendy pace), and with them the open loop.
	SkipThroughput bool
	// OpenLoads are the open-loop scenarios' arrival rates, as shares of
	// the rate bare Temporal sustained at saturation; each runs OpenFor.
	OpenLoads []float64
	// OpenRate is a fixed open-loop rate a second (0: none), run after
	// the shares: a one-time code's realistic load.
	OpenRate float64
	OpenFor  time.Duration
	// IntakeFrom is the intake's first rate of signed posts a second;
	// each step runs IntakeFor (0: no intake rows).
	IntakeFrom float64
	IntakeFor  time.Duration
	// Dir holds the processes' logs and state.
	Dir string
	// Bins are the worker and simulator; Self is this program, run as
	// the bare worker and the direct loop.
	Bins procs.Binaries
	Self string
	// Log receives progress.
	Log io.Writer
}

// tuningArgs are the worker flags of the tuning, for both kinds of worker.
func (c Config) tuningArgs() []string {
	var out []string
	for _, f := range []struct {
		flag string
		v    int
	}{{"--sticky-cache", c.StickyCache}, {"--workflow-pollers", c.WorkflowPollers}, {"--activity-pollers", c.ActivityPollers}} {
		if f.v != 0 {
			out = append(out, f.flag, strconv.Itoa(f.v))
		}
	}
	return out
}

// Row is one scenario's figures.
type Row struct {
	Backend  string `json:"backend"`
	Scenario string `json:"scenario"`
	Events   int    `json:"events"`
	// Starts is the start calls made (3 per event in the 3x scenario).
	Starts int `json:"starts"`
	// AcceptedPerSec and DonePerSec: events over the time from the
	// first start to the last acceptance, and to the last completion.
	AcceptedPerSec float64   `json:"acceptedPerSec"`
	DonePerSec     float64   `json:"donePerSec"`
	ToAccepted     Latencies `json:"toAccepted"`
	ToDone         Latencies `json:"toDone"`
	// WorkerCPUPer1k and ServerCPUPer1k are CPU seconds per 1,000 events.
	WorkerCPUPer1k Seconds `json:"workerCpuPer1k"`
	ServerCPUPer1k Seconds `json:"serverCpuPer1k"`
	// WorkerPeakMB is the worker process's peak resident memory.
	WorkerPeakMB float64 `json:"workerPeakMb"`
	// HistoryEvents is the mean history length of a run.
	HistoryEvents float64 `json:"historyEvents"`
	// Messages is what the simulator created for the events.
	Messages int `json:"messages"`
	// Cost is what one run of the scenario spent (nil: not read), and
	// History its events, a line each.
	Cost    *Cost    `json:"cost,omitempty"`
	History []string `json:"history,omitempty"`
}

// MemoryRow is the worker's memory with runs awaiting a decision.
type MemoryRow struct {
	Backend     string  `json:"backend"`
	StickyCache int     `json:"stickyCache"`
	Runs        int     `json:"runs"`
	RSSMB       float64 `json:"rssMb"`
	PeakMB      float64 `json:"peakMb"`
	// AnonMB is the worker's own memory in RSS, without the program's
	// file pages (which the server process, running the same program,
	// shares).
	AnonMB float64 `json:"anonMb"`
}

// SendyRow is the pace to Sendy under its limit.
type SendyRow struct {
	Backend string `json:"backend"`
	Events  int    `json:"events"`
	Limit   int    `json:"limitPerMinute"`
	// Requests were made over Minutes, PerMinute on average; TooMany is
	// the 429s among them.
	Requests  int     `json:"requests"`
	Minutes   float64 `json:"minutes"`
	PerMinute float64 `json:"perMinute"`
	TooMany   int     `json:"tooMany"`
	Accepted  int     `json:"accepted"`
}

// Report is the whole run's result.
type Report struct {
	At     time.Time   `json:"at"`
	Cores  int         `json:"cores"`
	N      int         `json:"n"`
	Conc   int         `json:"concurrency"`
	Rows   []Row       `json:"rows"`
	Memory []MemoryRow `json:"memory"`
	Sendy  []SendyRow  `json:"sendy"`
	Open   []OpenRow   `json:"open"`
	Intake []IntakeRow `json:"intake"`
}

// Scenario names.
const (
	ScenarioBare    = "bare"
	ScenarioOurs    = "ours"
	ScenarioOurs3x  = "ours-3x"
	ScenarioDirect  = "direct"
	scenarioIntake  = "intake"
	scenarioPrefix  = "bench"
	stopGrace       = 30 * time.Second
	workerMemoryMiB = 1 << 20
)

// Run measures every scenario on every backend.
func Run(ctx context.Context, cfg Config) (Report, error) {
	rep := Report{At: time.Now().UTC(), Cores: runtime.NumCPU(), N: cfg.N, Conc: cfg.Concurrency}
	for _, b := range cfg.Backends {
		if b == BackendPostgres && cfg.Postgres == "" {
			return rep, fmt.Errorf("the postgres backend needs a PostgreSQL server: give -postgres postgres://user@host:5432/postgres")
		}
		s := &stack{cfg: cfg, backend: b, dir: filepath.Join(cfg.Dir, b)}
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return rep, err
		}
		err := func() error {
			defer s.down(context.WithoutCancel(ctx))
			s.logf("starting the Temporal server and the simulators")
			if err := s.up(ctx); err != nil {
				return err
			}
			return s.measure(ctx, &rep)
		}()
		if err != nil {
			return rep, fmt.Errorf("%s: %w (logs in %s)", b, err, s.dir)
		}
	}
	return rep, nil
}

// measure runs the scenarios on one backend's stack.
func (s *stack) measure(ctx context.Context, rep *Report) error {
	opts, err := s.clientOptions()
	if err != nil {
		return err
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return fmt.Errorf("dial Temporal at %s: %w", s.frontend, err)
	}
	defer c.Close()
	st := starter.New(c)
	if !s.cfg.SkipThroughput {
		if err := s.throughputRows(ctx, c, st, rep); err != nil {
			return err
		}
		if len(s.cfg.OpenLoads) > 0 {
			if err := s.openLoop(ctx, c, st, rep); err != nil {
				return err
			}
		}
	}
	for _, size := range s.cfg.CacheSizes {
		if s.cfg.Await == 0 {
			break
		}
		m, err := s.awaiting(ctx, c, st, size)
		if err != nil {
			return fmt.Errorf("memory with %d runs awaiting a decision: %w", s.cfg.Await, err)
		}
		rep.Memory = append(rep.Memory, m)
	}
	if s.cfg.SendyEvents > 0 {
		r, err := s.sendy(ctx, c, st)
		if err != nil {
			return fmt.Errorf("the Sendy limit: %w", err)
		}
		rep.Sendy = append(rep.Sendy, r)
	}
	// Last: the runs it starts may outlast it.
	if s.cfg.IntakeFor > 0 {
		if err := s.intakeLoad(ctx, c, rep); err != nil {
			return fmt.Errorf("the intake's load: %w", err)
		}
	}
	return nil
}

// throughputRows runs bare, ours, ours-3x and direct.
func (s *stack) throughputRows(ctx context.Context, c client.Client, st *starter.Starter, rep *Report) error {
	for _, sc := range []struct {
		name   string
		copies int
	}{{ScenarioBare, 1}, {ScenarioOurs, 1}, {ScenarioOurs3x, 3}} {
		row, err := s.throughput(ctx, c, st, sc.name, sc.copies)
		if err != nil {
			return fmt.Errorf("scenario %s: %w", sc.name, err)
		}
		rep.Rows = append(rep.Rows, row)
	}
	row, err := s.direct(ctx)
	if err != nil {
		return fmt.Errorf("scenario direct: %w", err)
	}
	rep.Rows = append(rep.Rows, row)
	return nil
}

// prefix names a scenario's events apart from every other's.
func prefix(scenario string) string {
	return fmt.Sprintf("%s%s%d", scenarioPrefix, scenarioTag(scenario), time.Now().UnixNano()%1_000_000_000)
}

func scenarioTag(s string) string {
	switch s {
	case ScenarioBare:
		return "b"
	case ScenarioOurs:
		return "o"
	case ScenarioOurs3x:
		return "t"
	case ScenarioDirect:
		return "d"
	case scenarioIntake:
		return "i"
	}
	return "x"
}

// throughput runs one Temporal scenario: a fresh worker, N events
// started Concurrency at a time, until every run has closed.
func (s *stack) throughput(ctx context.Context, c client.Client, st *starter.Starter, name string, copies int) (Row, error) {
	row := Row{Backend: s.backend, Scenario: name, Events: s.cfg.N, Starts: s.cfg.N * copies}
	bare := name == ScenarioBare
	w, err := s.startWorker(ctx, c, workerSpec{name: "worker-" + name, bare: bare, sim: s.sims["main"]})
	if err != nil {
		return row, err
	}
	defer w.Stop(stopGrace)
	wBefore, sBefore, err := s.usages(w)
	if err != nil {
		return row, err
	}
	s.logf("%s: %d events, %d starts at a time", name, s.cfg.N, s.cfg.Concurrency)
	since := time.Now().Add(-time.Second)
	var runs map[string]*run
	wfType := contract.WorkflowName
	if bare {
		wfType = BareWorkflowName
		runs, err = startBare(ctx, c, prefix(name), s.cfg.N, s.cfg.Concurrency)
	} else {
		runs, err = startEvents(ctx, st, prefix(name), s.cfg.N, copies, s.cfg.Concurrency, "bird")
	}
	if err != nil {
		return row, err
	}
	q := visibilityQuery(wfType, since)
	if err := awaitCount(ctx, c, q+" AND ExecutionStatus = 'Running'", 0, timeout(s.cfg.N)); err != nil {
		return row, err
	}
	wAfter, sAfter, err := s.usages(w)
	if err != nil {
		return row, err
	}
	if err := awaitCount(ctx, c, q, int64(len(runs)), time.Minute); err != nil {
		return row, err
	}
	if row.Messages, err = s.collect(ctx, c, q, runs, bare); err != nil {
		return row, err
	}
	fill(&row, runs)
	if err := oneRunsCost(ctx, c, &row, runs); err != nil {
		return row, err
	}
	row.WorkerCPUPer1k = per1k(wAfter.CPU-wBefore.CPU, s.cfg.N)
	row.ServerCPUPer1k = per1k(sAfter.CPU-sBefore.CPU, s.cfg.N)
	row.WorkerPeakMB = float64(wAfter.PeakRSS) / workerMemoryMiB
	s.logf("%s: %.1f events/s to accepted, %.1f to done", name, row.AcceptedPerSec, row.DonePerSec)
	return row, nil
}

// oneRunsCost reads one run's history into the row: what it cost.
func oneRunsCost(ctx context.Context, c client.Client, row *Row, runs map[string]*run) error {
	for id := range runs {
		events, err := history(ctx, c, id)
		if err != nil {
			return err
		}
		cost := costOf(events)
		row.Cost, row.History = &cost, describe(events)
		return nil
	}
	return nil
}

// usages reads what the child process p and the Temporal server have
// used so far.
func (s *stack) usages(p *procs.Proc) (proc, server Usage, err error) {
	if proc, err = usageOf(p); err != nil {
		return proc, server, err
	}
	server, err = usageOf(s.server)
	return proc, server, err
}

// usageOf reads what the child process p has used so far.
func usageOf(p *procs.Proc) (Usage, error) {
	return readUsage(strconv.Itoa(p.Cmd.Process.Pid))
}

// timeout bounds a scenario's wait for its n runs: generous (2 a
// second), since a slow machine is measured, not failed.
func timeout(n int) time.Duration {
	return 5*time.Minute + time.Duration(n)*time.Second/2
}

func per1k(d time.Duration, n int) Seconds {
	return Seconds(d.Seconds() * 1000 / float64(n))
}

// fill computes a row's throughput, latencies and history length.
func fill(row *Row, runs map[string]*run) {
	var first, lastAccepted, lastDone time.Time
	acc := make([]time.Duration, 0, len(runs))
	done := make([]time.Duration, 0, len(runs))
	var events int64
	for _, r := range runs {
		if first.IsZero() || r.start.Before(first) {
			first = r.start
		}
		if !r.accepted.IsZero() {
			acc = append(acc, r.accepted.Sub(r.start))
			if r.accepted.After(lastAccepted) {
				lastAccepted = r.accepted
			}
		}
		done = append(done, r.done.Sub(r.start))
		if r.done.After(lastDone) {
			lastDone = r.done
		}
		events += r.events
	}
	row.ToAccepted, row.ToDone = summarise(acc), summarise(done)
	if d := lastAccepted.Sub(first).Seconds(); d > 0 {
		row.AcceptedPerSec = float64(len(acc)) / d
	}
	if d := lastDone.Sub(first).Seconds(); d > 0 {
		row.DonePerSec = float64(len(done)) / d
	}
	if len(runs) > 0 {
		row.HistoryEvents = float64(events) / float64(len(runs))
	}
}

// direct runs the plain HTTP loop as a child process of its own.
func (s *stack) direct(ctx context.Context) (Row, error) {
	row := Row{Backend: s.backend, Scenario: ScenarioDirect, Events: s.cfg.N, Starts: s.cfg.N}
	pre := prefix(ScenarioDirect)
	out := filepath.Join(s.dir, "direct.json")
	s.logf("direct: %d events, %d at a time, without Temporal", s.cfg.N, s.cfg.Concurrency)
	p, err := procs.Start("direct", s.cfg.Self, []string{
		"-role", "direct", "-sim", s.sims["main"], "-prefix", pre, "-n", strconv.Itoa(s.cfg.N),
		"-concurrency", strconv.Itoa(s.cfg.Concurrency), "-status-poll", s.cfg.StatusPoll.String(), "-out", out,
	}, s.creds.Env(), filepath.Join(s.dir, "direct.log"))
	if err != nil {
		return row, err
	}
	wctx, cancel := context.WithTimeout(ctx, timeout(s.cfg.N))
	defer cancel()
	if err := p.Wait(wctx); err != nil {
		return row, fmt.Errorf("the direct loop failed (see %s): %w", filepath.Join(s.dir, "direct.log"), err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return row, err
	}
	var res DirectResult
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&res); err != nil {
		return row, fmt.Errorf("read %s: %w", out, err)
	}
	if len(res.Started) != s.cfg.N || len(res.Accepted) != s.cfg.N || len(res.Done) != s.cfg.N {
		return row, fmt.Errorf("%s holds %d events, not %d", out, len(res.Done), s.cfg.N)
	}
	runs := make(map[string]*run, s.cfg.N)
	for i := range res.Done {
		runs[strconv.Itoa(i)] = &run{start: res.Started[i], accepted: res.Accepted[i], done: res.Done[i]}
	}
	fill(&row, runs)
	row.WorkerCPUPer1k = per1k(res.CPU, s.cfg.N)
	row.WorkerPeakMB = float64(res.PeakRSS) / workerMemoryMiB
	var msgs struct {
		Messages []simMessage `json:"messages"`
	}
	if err := getJSON(ctx, s.sims["main"]+"/_sim/messages?provider=bird", &msgs); err != nil {
		return row, err
	}
	for _, m := range msgs.Messages {
		if len(m.Key) > len("order-"+pre) && m.Key[:len("order-"+pre)] == "order-"+pre {
			row.Messages++
		}
	}
	return row, nil
}

// awaiting leaves Await runs awaiting a decision (every message ends
// failed) under a fresh worker with the given sticky cache size, and
// reads its memory.
func (s *stack) awaiting(ctx context.Context, c client.Client, st *starter.Starter, size int) (MemoryRow, error) {
	m := MemoryRow{Backend: s.backend, StickyCache: size, Runs: s.cfg.Await}
	name := fmt.Sprintf("worker-await-%d", size)
	w, err := s.startWorker(ctx, c, workerSpec{name: name, sim: s.sims["failing"], extra: []string{"--sticky-cache", strconv.Itoa(size)}})
	if err != nil {
		return m, err
	}
	defer w.Stop(stopGrace)
	s.logf("memory: %d runs to await a decision, sticky cache %d", s.cfg.Await, size)
	since := time.Now().Add(-time.Second)
	if _, err := startEvents(ctx, st, prefix("await"), s.cfg.Await, 1, s.cfg.Concurrency, "bird"); err != nil {
		return m, err
	}
	q := ourQuery(since) + fmt.Sprintf(" AND %s = '%s'", contract.StateAttribute.GetName(), contract.AwaitingDecision)
	if err := awaitCount(ctx, c, q, int64(s.cfg.Await), timeout(s.cfg.Await)); err != nil {
		return m, err
	}
	time.Sleep(2 * time.Second) // the last tasks' completions
	u, err := usageOf(w)
	if err != nil {
		return m, err
	}
	m.RSSMB, m.PeakMB, m.AnonMB = float64(u.RSS)/workerMemoryMiB, float64(u.PeakRSS)/workerMemoryMiB, float64(u.AnonRSS)/workerMemoryMiB
	return m, nil
}

// sendy sends SendyEvents events to a Sendy that allows 60 requests a
// minute, under the worker's default limit, and counts its requests.
func (s *stack) sendy(ctx context.Context, c client.Client, st *starter.Starter) (SendyRow, error) {
	r := SendyRow{Backend: s.backend, Events: s.cfg.SendyEvents, Limit: SendyLimit}
	w, err := s.startWorker(ctx, c, workerSpec{name: "worker-sendy", sim: s.sims["sendy"], extra: []string{"--sendy-rate-limit", strconv.Itoa(SendyLimit)}})
	if err != nil {
		return r, err
	}
	defer w.Stop(stopGrace)
	s.logf("sendy: %d events under a limit of %d a minute, measured for up to %s", s.cfg.SendyEvents, SendyLimit, s.cfg.SendyFor)
	since := time.Now().Add(-time.Second)
	if _, err := startEvents(ctx, st, prefix("sendy"), s.cfg.SendyEvents, 1, s.cfg.Concurrency, "sendy"); err != nil {
		return r, err
	}
	// Until every run closed, or the measuring time is up.
	q := ourQuery(since) + " AND ExecutionStatus = 'Running'"
	if err := awaitCount(ctx, c, q, 0, s.cfg.SendyFor); err != nil {
		s.logf("sendy: measured for %s with runs still going (%v)", s.cfg.SendyFor, err)
	}
	var reqs struct {
		Requests []simRequest `json:"requests"`
	}
	if err := getJSON(ctx, s.sims["sendy"]+"/_sim/requests?provider=sendy", &reqs); err != nil {
		return r, err
	}
	var msgs struct {
		Messages []simMessage `json:"messages"`
	}
	if err := getJSON(ctx, s.sims["sendy"]+"/_sim/messages?provider=sendy", &msgs); err != nil {
		return r, err
	}
	r.Accepted = len(msgs.Messages)
	r.Requests, r.TooMany, r.Minutes, r.PerMinute = pace(reqs.Requests)
	return r, nil
}

// pace measures the requests of the busy time: from the first request
// to the last send (POST), while sends were waiting for their turn and
// every request the limit allows was wanted. It returns the requests in
// it, the 429s among them, its length and the requests a minute.
func pace(reqs []simRequest) (n, tooMany int, minutes, perMinute float64) {
	last := -1
	for i, q := range reqs {
		if q.Method == "POST" {
			last = i
		}
	}
	if last < 1 || !reqs[last].At.After(reqs[0].At) {
		return last + 1, 0, 0, 0
	}
	busy := reqs[:last+1]
	for _, q := range busy {
		if q.Status == 429 {
			tooMany++
		}
	}
	minutes = busy[last].At.Sub(busy[0].At).Minutes()
	// len(busy) requests span len(busy)-1 intervals.
	return len(busy), tooMany, minutes, float64(len(busy)-1) / minutes
}

// quietLogger is the bench client's logger: warnings and errors only.
func quietLogger() *zap.Logger {
	l, err := logging.New(logging.Options{Level: "warn"})
	if err != nil { // the options are constant: cannot happen
		l = zap.NewNop()
	}
	return l
}
