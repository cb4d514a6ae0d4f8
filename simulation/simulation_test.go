package simulation

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	seedFlag    = flag.Int64("seed", 0, "replay one seed and print its timeline")
	seedsFlag   = flag.Int("seeds", 200, "how many seeds TestSimulation runs")
	baseFlag    = flag.Int64("base", 1, "the first seed TestSimulation runs")
	showFlag    = flag.Bool("timeline", false, "print the timeline of every seed, not only of failing ones")
	maxFailFlag = flag.Int("max-failures", 5, "stop after this many failing seeds")
	briefFlag   = flag.Bool("brief", false, "for a failing seed, print its first broken promise, not its timeline (the mutation score reads these)")
	workersFlag = flag.Int("workers", runtime.GOMAXPROCS(0), "how many seeds TestSimulation runs at once")
)

// openDefects are seeds that break a promise on main because of a defect
// the simulation found and that is not fixed yet (testdata/open-defects.txt,
// one "seed: what breaks" a line). Such a seed is reported, not failed;
// once it passes, the test fails until the line is removed, so the list
// never outlives its defects.
func openDefects(t testing.TB) map[int64]string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "open-defects.txt"))
	if err != nil {
		t.Fatalf("read the open defects: %v", err)
	}
	defer func() { _ = f.Close() }()
	out := map[int64]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		seed, what, ok := strings.Cut(line, ":")
		n, err := strconv.ParseInt(strings.TrimSpace(seed), 10, 64)
		if !ok || err != nil {
			t.Fatalf("testdata/open-defects.txt: %q is not \"seed: what breaks\"", line)
		}
		out[n] = strings.TrimSpace(what)
	}
	return out
}

// judge runs one seed and reports it: a broken promise fails the test
// unless the seed is an open defect; an open defect that passes fails it.
// A seed that cannot run is an error, not a Fatal, so TestSimulation's
// goroutines may call it (only the test's own goroutine may call Fatal).
func judge(t testing.TB, seed int64, open map[int64]string, show bool) (*Lifetime, bool) {
	t.Helper()
	l, err := Run(seed)
	if err != nil {
		t.Errorf("seed %d: %v", seed, err)
		return nil, true
	}
	return l, report(t, seed, l, open, show)
}

// report judges a lifetime that ran: it reports whether it broke a
// promise that is not an open defect.
func report(t testing.TB, seed int64, l *Lifetime, open map[int64]string, show bool) bool {
	t.Helper()
	known, isOpen := open[seed]
	switch {
	case l.Failed() && isOpen:
		t.Logf("seed %d: open defect, still found (%s)", seed, known)
	case l.Failed() && *briefFlag:
		t.Errorf("seed %d broke a promise: %s", seed, l.Violations[0])
		return true
	case l.Failed():
		t.Log("\n" + l.Report())
		t.Errorf("seed %d broke a promise: replay it with go test ./simulation -run 'TestSimulation$' -seed %d", seed, seed)
		return true
	case isOpen:
		t.Errorf("seed %d passes now: remove it from testdata/open-defects.txt (%s)", seed, known)
	case show:
		t.Log("\n" + l.Report())
	}
	return false
}

// TestSimulation runs -seeds lifetimes from -base (or the one -seed,
// printing its timeline) and fails with the timeline of each seed that
// broke a promise.
func TestSimulation(t *testing.T) {
	open := openDefects(t)
	if *seedFlag != 0 {
		l, err := Run(*seedFlag)
		if err != nil {
			t.Fatal(err)
		}
		t.Log("\n" + l.Report())
		if l.Failed() {
			t.Fatalf("seed %d broke %d promise(s)", *seedFlag, len(l.Violations))
		}
		return
	}
	seeds := *seedsFlag
	started := time.Now()
	// Each lifetime is a world of its own: the seeds run on every core,
	// each judged as it ends.
	var (
		mu                   sync.Mutex
		judged, failed, runs int
		next                 = *baseFlag
		end                  = *baseFlag + int64(seeds)
		wg                   sync.WaitGroup
	)
	for range max(1, *workersFlag) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				s := next
				next++
				stop := s >= end || failed >= *maxFailFlag
				mu.Unlock()
				if stop {
					return
				}
				l, bad := judge(t, s, open, *showFlag)
				mu.Lock()
				judged++
				if l != nil {
					runs += l.Runs
				}
				if bad {
					failed++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	took := time.Since(started)
	t.Logf("simulation: %d seeds from %d (%d workflow runs) in %s on %d workers: %.0f lifetimes a minute, %d failed",
		judged, *baseFlag, runs, took.Round(time.Millisecond), *workersFlag, float64(judged)/took.Minutes(), failed)
	if failed >= *maxFailFlag {
		t.Fatalf("stopped after %d failing seeds", failed)
	}
}

// TestSimulationRegressionSeeds runs the seeds that found defects in
// earlier builds of SendSMS (each fixed: before 1.0.0, or later as
// docs/CHANGELOG.md says), and the seeds that found a false alarm of the
// oracle (each fixed in the check): every one must pass. What each broke
// then is named beside it.
func TestSimulationRegressionSeeds(t *testing.T) {
	for _, c := range []struct {
		seed   int64
		defect string
	}{
		{1678, "an uncertain attempt is forgotten when a later attempt is rejected (401): silent duplicate"},
		{381, "no last look when every search failed: a Cancelled run hides a message a hung attempt made"},
		{1676, "an acknowledged resend whose search failed is dropped"},
		{53, "a run a Temporal reset made is fenced out by the run it replaced: never settled"},
		{2245, "after a reset, the new run's send is refused (401) and it ends Failed, forgetting the message the run it replaced was accepted with"},
		{2777, "the same at Sendy"},
		{3387, "after a reset that follows a resend, the new run's result lacks the first message, which the ledger holds"},
		{1524, "a Sendy that forgot an uncertain attempt's message answers a later one with a second; a reset after it, and the new run's replay ends Delivered without a possible duplicate"},
		{8857, "oracle false alarm: a Sendy that forgot the first answer's message, a move to Bird on the run's search, and the failover check blamed the move for the message no run could see"},
	} {
		t.Run(fmt.Sprintf("seed-%d", c.seed), func(t *testing.T) {
			l, err := Run(c.seed)
			if err != nil {
				t.Fatal(err)
			}
			if l.Failed() {
				t.Fatalf("seed %d (once: %s) breaks a promise again:\n%s", c.seed, c.defect, l.Report())
			}
		})
	}
}

// TestSimulationReplaysExactly runs a seed twice: the same seed must make
// the same timeline, or a failing seed could not be replayed.
func TestSimulationReplaysExactly(t *testing.T) {
	for _, seed := range []int64{53, 2235, 3387, 5161} {
		a, err := Run(seed)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Run(seed)
		if err != nil {
			t.Fatal(err)
		}
		if a.Timeline.String() != b.Timeline.String() {
			t.Fatalf("seed %d made two timelines:\n%s\n---\n%s", seed, a.Timeline, b.Timeline)
		}
	}
}

// FuzzSimulation drives the scenario generator with the fuzzer's seeds
// (go test ./simulation -run '^$' -fuzz FuzzSimulation); its corpus in
// testdata/fuzz/FuzzSimulation keeps the seeds worth running every time.
func FuzzSimulation(f *testing.F) {
	open := openDefects(f)
	f.Fuzz(func(t *testing.T, seed int64) {
		judge(t, seed, open, false)
	})
}
