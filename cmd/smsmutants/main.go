// Command smsmutants measures the deterministic simulation by planted
// defects: it plants each mutant of simulation/mutants alone, runs the
// simulation's seeds on it and prints the score. See mutation.Main.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/acme/smsorch/cmd/smsmutants/mutation"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := mutation.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
