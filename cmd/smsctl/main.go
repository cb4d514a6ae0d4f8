// Command smsctl sends and steers SMS event runs; see cli.Main or run
// `smsctl --help`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/acme/smsorch/cmd/smsctl/cli"
	"github.com/acme/smsorch/internal/tracing"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	// A send or a decision is a span of its event's trace when the
	// standard OTEL_* variables name a collector.
	_, stopTracing, err := tracing.Setup(ctx, "smsctl", nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "smsctl:", err)
		os.Exit(2)
	}
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Environ())
	stop()
	flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if err := stopTracing(flush); err != nil {
		fmt.Fprintln(os.Stderr, "smsctl: the spans could not be exported:", err)
	}
	cancel()
	os.Exit(code)
}
