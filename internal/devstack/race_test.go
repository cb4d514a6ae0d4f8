//go:build race

package devstack

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// nonRace is this package's test binary built without -race.
var nonRace string

// Under the race detector this package has no files but this one (see
// the package comment), so `go test -race ./...` still runs its tests:
// TestMain builds them without -race, before m.Run so that a first,
// cold build of the Temporal server does not count against -timeout,
// and TestThePackageWithoutTheRaceDetector runs them.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "smsorch-devstack-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	nonRace = filepath.Join(dir, "devstack.test")
	if out, err := exec.Command("go", "test", "-c", "-o", nonRace, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build the devstack tests without -race (go test -c .): %v\n%s", err, out)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func TestThePackageWithoutTheRaceDetector(t *testing.T) {
	args := []string{"-test.count=1", "-test.v"}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	if d, ok := t.Deadline(); ok {
		// Its own timeout ends first, so its panic names the test that hung.
		args = append(args, "-test.timeout="+(time.Until(d)*9/10).Round(time.Second).String())
	}
	out, err := exec.Command(nonRace, args...).CombinedOutput()
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
