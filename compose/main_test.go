package compose

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// imageBinaries are the image's binaries, built from the Dockerfile's RUN
// lines (buildTheImagesBinaries says how), for
// TestTheComposeStackRunsFromItsOwnLines.
var imageBinaries struct {
	bins map[string]string
	err  error
}

// TestMain builds the image's binaries before any test runs: the
// build is the rehearsal's setup, not what it tests, so go test's
// timeout does not count it. On a clone whose dev stack was built once
// it compiles little and links four binaries; on an empty build cache it
// compiles the Temporal server, which alone takes about 7 minutes on 2
// cores. It is skipped when -short or -run leaves the rehearsal out.
func TestMain(m *testing.M) {
	flag.Parse()
	if rehearsalSelected() {
		dir, err := os.MkdirTemp("", "smsorch-image-bins-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		imageBinaries.bins, imageBinaries.err = buildTheImagesBinaries(dir)
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
