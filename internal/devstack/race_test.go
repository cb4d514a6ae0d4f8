//go:build race

package devstack

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/smsorch/internal/stackproc"
)

var (
	// nonRace is this package's test binary built without -race.
	nonRace string
	// mainStart is when this test process started, about: the go command
	// kills it at -timeout plus a minute from then.
	mainStart = time.Now()
)

// Under the race detector this package has no files but this one (see
// the package comment), so `go test -race ./...` still runs its tests:
// TestMain builds them without -race, under the module's build lock (one
// test binary compiles the Temporal server, the others find it built)
// and before m.Run, and TestThePackageWithoutTheRaceDetector runs them.
func TestMain(m *testing.M) {
	flag.Parse()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "smsorch-devstack-test-")
	if err == nil {
		nonRace = filepath.Join(dir, "devstack.test")
		err = buildNonRace(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func buildNonRace(ctx context.Context) error {
	return stackproc.WithBuildLock(ctx, func() error {
		cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", nonRace, ".")
		cmd.Env = stackproc.WithoutRace(os.Environ())
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build the devstack tests without -race (go test -c .): %v\n%s", err, out)
		}
		return nil
	})
}

func TestThePackageWithoutTheRaceDetector(t *testing.T) {
	// This binary holds none of the package: go test's cache must see
	// the files the other is built from, opened here, once m.Run records
	// what the test opens.
	root, err := stackproc.ModuleRoot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stackproc.Consult(context.Background(), root, "./internal/devstack", true); err != nil {
		t.Fatal(err)
	}
	args := []string{"-test.count=1", "-test.v"}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	if end, ok := innerDeadline(t); ok {
		// Its own timeout ends first, so its panic names the test that hung.
		args = append(args, "-test.timeout="+time.Until(end).Round(time.Second).String())
	}
	cmd := exec.Command(nonRace, args...)
	cmd.SysProcAttr = stackproc.ChildAttr()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("this package's tests, built without -race, failed: %v\n%s", err, out)
	}
	// What ran, for go test -v.
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "--- ") {
			t.Log(strings.TrimSpace(l))
		}
	}
	if !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("this package's tests, built without -race, ran no test:\n%s", out)
	}
}

// innerDeadline is half a minute before the first of this test's
// deadline and the go command's kill (-timeout plus a minute from the
// process's start, which counts the build in TestMain).
func innerDeadline(t *testing.T) (time.Time, bool) {
	end, ok := t.Deadline()
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, _ := f.Value.(flag.Getter).Get().(time.Duration); d > 0 {
			if kill := mainStart.Add(d + time.Minute); !ok || kill.Before(end) {
				end, ok = kill, true
			}
		}
	}
	return end.Add(-30 * time.Second), ok
}
