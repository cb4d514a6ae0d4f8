// Command worker runs the SMS orchestrator's Temporal worker.
//
//	go run ./worker --dev   # everything on this machine: Temporal + web UI, simulator, ledger
//	go run ./worker         # against a Temporal cluster (TEMPORAL_ADDRESS, ...) and real providers
//	worker healthcheck URL  # exit 0 when URL (a /healthz or /readyz) answers 2xx
//
// See README.md, docs/operations.md and app.Config for every setting.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/acme/smsorch/app"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "healthcheck" {
		// A container's health check: the image has no shell or wget.
		if err := app.HealthCheck(context.Background(), os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(1)
		}
		return
	}
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
