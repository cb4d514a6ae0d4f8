// Command worker runs the SMS orchestrator's Temporal worker.
//
//	go run ./worker --dev   # everything on this machine: Temporal + web UI, simulator, ledger
//	go run ./worker         # against a Temporal cluster (TEMPORAL_ADDRESS, ...) and real providers
//	worker healthcheck URL  # exit 0 when URL (a /healthz or /readyz) answers 2xx
//
// See README.md, docs/operations.md and app.Config for every setting.
package main

import (
	"os"

	"github.com/acme/smsorch/app"
)

func main() {
	// The first SIGINT or SIGTERM stops gracefully; a second exits at once.
	ctx, stop := app.StopOnSignal(os.Stderr, os.Exit)
	code := app.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
