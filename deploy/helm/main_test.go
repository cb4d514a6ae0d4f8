package helm

import (
	"os"
	"testing"

	"github.com/acme/smsorch/internal/rehearse"
)

// imageBinaries are the image's binaries, built from the Dockerfile's RUN
// lines (rehearse.Binaries says how), for
// TestTheChartRunsFromItsOwnManifests.
var imageBinaries rehearse.Images

func TestMain(m *testing.M) {
	os.Exit(rehearse.Main(m, "../..", "TestTheChartRunsFromItsOwnManifests", &imageBinaries))
}
