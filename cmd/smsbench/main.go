// Command smsbench measures the orchestrator beside bare Temporal and a
// plain HTTP loop, on this machine, in one run (see the bench package
// and docs/performance.md).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/acme/smsorch/cmd/smsbench/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := bench.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
