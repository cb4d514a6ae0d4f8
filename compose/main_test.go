package compose

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// imageBinaries are the image's binaries, built as the Dockerfile's RUN
// lines build them, for TestTheComposeStackRunsFromItsOwnLines.
var imageBinaries struct {
	bins map[string]string
	err  error
}

// TestMain builds the image's binaries before any test runs. On a cold
// build cache (a clone whose dev stack was built once, without
// -trimpath and with cgo) that build compiles the Temporal server and
// the standard library afresh, which takes longer than go test's
// default 10-minute timeout on 2 cores; the timeout guards the tests,
// and the build is their setup, so it runs before the timeout's clock
// starts. It is skipped when -short or -run leaves the rehearsal out.
func TestMain(m *testing.M) {
	flag.Parse()
	if rehearsalSelected() {
		dir, err := os.MkdirTemp("", "smsorch-image-bins-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		imageBinaries.bins, imageBinaries.err = buildAsTheDockerfileDoes(dir)
		code := m.Run()
		_ = os.RemoveAll(dir)
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// rehearsalSelected says whether this go test runs the rehearsal.
func rehearsalSelected() bool {
	if testing.Short() {
		return false
	}
	run := flag.Lookup("test.run").Value.String()
	if run == "" {
		return true
	}
	// go test matches the part before the first slash against top-level
	// names; a pattern it rejects builds anyway and lets go test say why.
	re, err := regexp.Compile(strings.Split(run, "/")[0])
	return err != nil || re.MatchString("TestTheComposeStackRunsFromItsOwnLines")
}
