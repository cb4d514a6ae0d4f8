// Command smsdrill is the fault drill: it builds the worker and the
// simulator, runs them as separate processes with faults of every kind,
// duplicate starts, SIGKILLs of the worker and a slice of providers down
// past the window, then counts the messages the simulator created per
// event beside each run's result and the audit. It prints a table and
// JSON and exits 1 on any silent duplicate, lost event, message the run
// does not know, or resend without a reconciliation.
//
//	go run ./cmd/smsdrill                          # 1,000 events, seed from the clock
//	go run ./cmd/smsdrill -events 75 -seed 1,2     # what CI runs
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/acme/smsorch/cmd/smsdrill/drill"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(drill.Main(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
