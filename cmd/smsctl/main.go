// Command smsctl sends and steers SMS event runs; see cli.Main or run
// `smsctl --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/acme/smsorch/cmd/smsctl/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
