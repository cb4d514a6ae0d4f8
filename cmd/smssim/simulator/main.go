package simulator

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"go.uber.org/zap"

	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/internal/secrets"
)

// Main is smssim: the simulator on an address until ctx ends. The
// credentials it accepts come from --bird-access-key and --sendy-token,
// else BIRD_ACCESS_KEY and SENDY_TOKEN (or the files their _FILE names), else the dev defaults. It returns
// the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if err := run(ctx, args, stderr); err != nil {
		fmt.Fprintln(stderr, "smssim:", err)
		return 1
	}
	return 0
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("smssim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	var faults FaultFlag
	addr := fs.String("addr", "127.0.0.1:8299", "address to listen on")
	logFormat := fs.String("log-format", "console", "log format: console or json")
	cfg.RegisterFlags(fs, "", &faults)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	// The credentials it accepts may come from the environment, as the
	// workers' do, so they stay off the process list.
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, c := range []struct {
		env, flag string
		dst       *string
	}{{"BIRD_ACCESS_KEY", "bird-access-key", &cfg.BirdAccessKey}, {"SENDY_TOKEN", "sendy-token", &cfg.SendyToken}} {
		v, err := secrets.Optional(os.Getenv, c.env)
		if err != nil {
			return err
		}
		if v != "" && !given[c.flag] {
			*c.dst = v
		}
	}

	log, err := logging.New(logging.Options{Format: logging.Format(*logFormat)})
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	cfg.Logger = log
	sim, err := New(cfg)
	if err != nil {
		return err
	}
	for _, f := range faults {
		if err := sim.AddFault(f); err != nil {
			return err
		}
	}
	l, err := sim.Listen(*addr)
	if err != nil {
		return err
	}
	log.Info("provider simulator listening", zap.String("url", l.URL),
		zap.String("bird", l.URL+"/workspaces/{workspace}/channels/{channel}/messages"),
		zap.String("sendy", l.URL+"/api/v1/messages"), zap.String("admin", l.URL+"/_sim/messages"))
	<-ctx.Done()
	return l.Close()
}
