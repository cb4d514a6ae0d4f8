// Command smsctl sends and steers SMS event runs; see cli.Main or run
// `smsctl --help`.
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/acme/smsorch/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Environ())
	stop()
	os.Exit(code)
}
