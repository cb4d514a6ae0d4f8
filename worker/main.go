// Command worker runs the SMS orchestrator's Temporal worker.
//
//	go run ./worker --dev   # everything on this machine: Temporal + web UI, simulator, ledger
//	go run ./worker         # against a Temporal cluster (TEMPORAL_ADDRESS, ...) and real providers
//
// See README.md and app.Config for every setting.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/acme/smsorch/app"
)

func main() {
	var cfg app.Config
	cfg.RegisterFlags(flag.CommandLine)
	flag.Parse()
	ctx, stop := app.StopOnSignal(os.Stderr, os.Exit)
	defer stop()
	if err := app.Run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}
