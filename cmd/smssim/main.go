// Command smssim runs the provider simulator: Bird and Sendy on one
// address, with the /_sim/ admin API. See simulator.Main.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/acme/smsorch/cmd/smssim/simulator"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := simulator.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
