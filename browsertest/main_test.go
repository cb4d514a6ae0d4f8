package browsertest

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/acme/smsorch/app"
	"github.com/acme/smsorch/internal/stackproc"
)

// The Temporal server and web UI run in a child process built without
// the race detector (package stackproc), built before m.Run so that its
// first build does not count against -timeout.
func TestMain(m *testing.M) {
	if err := stackproc.Prepare(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	app.UseEmbedded(stackproc.Start)
	os.Exit(m.Run())
}
