package bench

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSummariseTakesTheNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	l := summarise(ds)
	require.Equal(t, Latencies{P50: 0.05, P95: 0.095, P99: 0.099, Max: 0.1, N: 100}, l)
	require.Equal(t, Latencies{P50: 0.007, P95: 0.007, P99: 0.007, Max: 0.007, N: 1}, summarise([]time.Duration{7 * time.Millisecond}))
	require.Zero(t, summarise(nil))
}

func TestReadUsageOfThisProcess(t *testing.T) {
	u, err := readUsage("self")
	require.NoError(t, err)
	require.Positive(t, u.RSS)
	require.GreaterOrEqual(t, u.PeakRSS, u.RSS)
	require.Positive(t, u.AnonRSS)
	require.Less(t, u.AnonRSS, u.RSS)
	_, err = readUsage("0")
	require.ErrorContains(t, err, "process 0")
}

func TestFillMeasuresFromTheFirstStart(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	runs := map[string]*run{}
	for i := range 10 {
		start := t0.Add(time.Duration(i) * 100 * time.Millisecond)
		runs[string(rune('a'+i))] = &run{start: start, accepted: start.Add(time.Second), done: start.Add(2 * time.Second), events: 26}
	}
	var row Row
	fill(&row, runs)
	// The last of 10 events was accepted 1.9 s after the first start.
	require.InDelta(t, 10/1.9, row.AcceptedPerSec, 1e-9)
	require.InDelta(t, 10/2.9, row.DonePerSec, 1e-9)
	require.Equal(t, Seconds(1), row.ToAccepted.P99)
	require.Equal(t, Seconds(2), row.ToDone.P50)
	require.Equal(t, 26.0, row.HistoryEvents)
}

func TestPaceCountsTheBusyTimeUpToTheLastSend(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var reqs []simRequest
	for i := range 61 { // 61 requests a second apart: 60 a minute
		m, status := "POST", 202
		if i%4 == 3 {
			m, status = "GET", 200
		}
		if i == 30 {
			status = 429
		}
		reqs = append(reqs, simRequest{At: t0.Add(time.Duration(i) * time.Second), Method: m, Status: status})
	}
	reqs[60].Method = "POST"
	// Lookups after the last send are not the busy time.
	reqs = append(reqs, simRequest{At: t0.Add(5 * time.Minute), Method: "GET", Status: 200})
	n, tooMany, minutes, perMinute := pace(reqs)
	require.Equal(t, 61, n)
	require.Equal(t, 1, tooMany)
	require.InDelta(t, 1.0, minutes, 1e-9)
	require.InDelta(t, 60.0, perMinute, 1e-9)
	n, _, _, perMinute = pace(reqs[:1])
	require.Equal(t, 1, n)
	require.Zero(t, perMinute)
}

func report() Report {
	rows := []Row{
		{Backend: "sqlite", Scenario: ScenarioBare, AcceptedPerSec: 30, DonePerSec: 30, ToAccepted: Latencies{P99: 2, N: 4}, ToDone: Latencies{N: 4}, WorkerCPUPer1k: 8, ServerCPUPer1k: 40},
		{Backend: "sqlite", Scenario: ScenarioOurs, AcceptedPerSec: 27, DonePerSec: 20, ToAccepted: Latencies{P99: 3.2, N: 4}, ToDone: Latencies{N: 4}, WorkerCPUPer1k: 20, ServerCPUPer1k: 80, Messages: 4},
		{Backend: "sqlite", Scenario: ScenarioOurs3x, AcceptedPerSec: 25, DonePerSec: 18, ToAccepted: Latencies{N: 4}, ToDone: Latencies{N: 4}, WorkerCPUPer1k: 22, ServerCPUPer1k: 100, Messages: 4},
		{Backend: "sqlite", Scenario: ScenarioDirect, AcceptedPerSec: 900, DonePerSec: 60, ToAccepted: Latencies{N: 4}, ToDone: Latencies{N: 4}, WorkerCPUPer1k: 1, Messages: 4},
	}
	return Report{N: 4, Rows: rows,
		Memory: []MemoryRow{{Backend: "sqlite", StickyCache: 1000, Runs: 4, RSSMB: 150}},
		Sendy:  []SendyRow{{Backend: "sqlite", Limit: 60, PerMinute: 56, TooMany: 0, Accepted: 3}},
		Open: []OpenRow{
			{Backend: "sqlite", Scenario: ScenarioBare, Load: 0.5, Rate: 15, Events: 9, ToAccepted: Latencies{P99: 0.2, N: 9}, ToDone: Latencies{P99: 0.3, N: 9}},
			{Backend: "sqlite", Scenario: ScenarioOurs, Load: 0.5, Rate: 15, Events: 8, ToAccepted: Latencies{P99: 0.25, N: 8}, ToDone: Latencies{P99: 1.3, N: 8}, Messages: 8},
		},
		Intake: []IntakeRow{
			{Backend: "sqlite", Rate: 20, Requests: 200, Latency: Latencies{P99: 0.05, N: 200}, IntakeCPUPer1k: 2.5},
			{Backend: "sqlite", Rate: 30, Requests: 300, Latency: Latencies{P99: 0.4, N: 300}, IntakeCPUPer1k: 2.25},
			{Backend: "sqlite", Rate: 45, Requests: 450, Errors: 2, FirstError: "503 Service Unavailable: busy", Latency: Latencies{P99: 0.6, N: 450}, IntakeCPUPer1k: 2.0},
		},
	}
}

func TestTargetsCompareWithTheBounds(t *testing.T) {
	got := map[string]Target{}
	for _, x := range report().Targets() {
		got[x.Name] = x
	}
	require.Len(t, got, 10)
	open := got["ours/bare p99 start to accepted, open loop at 50% of bare's rate"]
	require.InDelta(t, 1.25, open.Value, 1e-9)
	require.True(t, open.Met, "1.25 is within 1.3")
	lean := got["ours/bare p99 arrival to accepted, open loop at 50% of bare's rate"]
	require.InDelta(t, 1.25, lean.Value, 1e-9)
	require.Equal(t, 3.0, lean.Bound, "the lean run's bound at half of bare's rate")
	acc := got["ours/bare throughput to accepted"]
	require.InDelta(t, 0.9, acc.Value, 1e-9)
	require.True(t, acc.Met)
	done := got["ours/bare throughput to delivered"]
	require.InDelta(t, 20.0/30, done.Value, 1e-9)
	require.False(t, done.Met, "0.67 is under 0.7")
	require.InDelta(t, 20.0/18, got["ours-3x/ours time (starts 3x per event)"].Value, 1e-9)
	require.InDelta(t, 122.0/100, got["ours-3x/ours CPU (worker+server)"].Value, 1e-9)
	require.False(t, got["ours-3x/ours CPU (worker+server)"].Met)
	require.InDelta(t, 1.6, got["ours/bare p99 start to accepted"].Value, 1e-9)
	require.False(t, got["ours/bare p99 start to accepted"].Met)
	require.False(t, got["pace to Sendy under its limit of 60/min"].Met, "56 is under 57")
	require.True(t, got["429s from Sendy caused by our pace"].Met)
}

func TestPrintShowsEveryRowAndTarget(t *testing.T) {
	var b bytes.Buffer
	report().Print(&b)
	out := b.String()
	for _, want := range []string{"bare", "ours-3x", "direct", "runs awaiting a decision", "Sendy events", "MISSED", "met", "ours/direct throughput",
		"open loop: Poisson arrivals", "0.25/", "1.25x", "4.33x",
		"sqlite: first error at 45.0 posts/s: 503 Service Unavailable: busy", "sqlite: the intake held 30.0 posts/s (no error, p99 0.400 s), 2.2 s of its CPU per 1,000"} {
		require.Contains(t, out, want)
	}
	require.Equal(t, 1, strings.Count(out, "ours/bare throughput to accepted"))
}

func TestCheckFindsAMissingOrShortRow(t *testing.T) {
	cfg := Config{N: 4, Backends: []string{"sqlite"}, Await: 4, CacheSizes: []int{1000}, SendyEvents: 3}
	require.NoError(t, report().Check(cfg))
	r := report()
	r.Rows = r.Rows[:3]
	require.ErrorContains(t, r.Check(cfg), "no direct row")
	r = report()
	r.Rows[1].Messages = 5
	require.ErrorContains(t, r.Check(cfg), "created 5 messages for 4 events")
	r = report()
	r.Rows[2].ToDone.N = 3
	require.ErrorContains(t, r.Check(cfg), "3 events done")
	cfg.OpenLoads = []float64{0.5}
	require.NoError(t, report().Check(cfg))
	r = report()
	r.Open[1].Messages = 9
	require.ErrorContains(t, r.Check(cfg), "created 9 messages for 8 events")
	r = report()
	r.Open[0].ToAccepted.N = 8
	require.ErrorContains(t, r.Check(cfg), "open loop bare at 50%: 9 events done and 8 accepted of 9")
	cfg.OpenLoads = []float64{0.25, 0.5}
	require.ErrorContains(t, report().Check(cfg), "no open-loop bare row at 25%")
	cfg.OpenLoads = nil
	cfg.IntakeFor = time.Second
	require.NoError(t, report().Check(cfg), "an error past the first step is the intake's limit")
	r = report()
	r.Intake[0].Errors, r.Intake[0].FirstError = 1, "401 Unauthorized"
	require.ErrorContains(t, r.Check(cfg), "the intake's first step, 20.0 posts/s, had 1 errors of 200 requests, the first: 401 Unauthorized")
	r.Intake = nil
	require.ErrorContains(t, r.Check(cfg), "sqlite: no intake row with requests")
	cfg.IntakeFor = 0
	cfg.Backends = append(cfg.Backends, "postgres")
	require.ErrorContains(t, report().Check(cfg), "postgres: no bare row")
}

// TestArrivalsArePoissonAndNeverWaitForAnswers: a slow start does not
// delay the next arrival, and the arrivals' count and gaps are those of
// the rate (the seed fixes them).
func TestArrivalsArePoissonAndNeverWaitForAnswers(t *testing.T) {
	var mu sync.Mutex
	started := map[int]bool{}
	begun := time.Now()
	at, err := arrivals(context.Background(), 200, time.Second, 7, func(ctx context.Context, i int) error {
		mu.Lock()
		started[i] = true
		mu.Unlock()
		time.Sleep(300 * time.Millisecond) // a slow answer
		return nil
	})
	require.NoError(t, err)
	require.Less(t, time.Since(begun), 1500*time.Millisecond, "the arrivals did not wait for the answers")
	require.InDelta(t, 200, len(at), 60, "about rate × time arrivals")
	require.Len(t, started, len(at))
	for i := 1; i < len(at); i++ {
		require.True(t, at[i].After(at[i-1]) || at[i].Equal(at[i-1]))
	}
	require.Less(t, at[len(at)-1].Sub(begun), time.Second)

	_, err = arrivals(context.Background(), 100, time.Second, 7, func(ctx context.Context, i int) error {
		return errors.New("refused")
	})
	require.EqualError(t, err, "refused")
}
