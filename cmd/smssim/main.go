// Command smssim runs the provider simulator: Bird and Sendy on one
// address, with the /_sim/ admin API. See the simulator package. The
// credentials it accepts come from --bird-access-key and --sendy-token,
// else BIRD_ACCESS_KEY and SENDY_TOKEN, else the dev defaults.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"

	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/internal/logging"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "smssim:", err)
		os.Exit(1)
	}
}

func run() error {
	var cfg simulator.Config
	var faults simulator.FaultFlag
	addr := flag.String("addr", "127.0.0.1:8299", "address to listen on")
	logFormat := flag.String("log-format", "console", "log format: console or json")
	cfg.RegisterFlags(flag.CommandLine, "", &faults)
	flag.Parse()
	// The credentials it accepts may come from the environment, as the
	// workers' do, so they stay off the process list.
	given := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if v := os.Getenv("BIRD_ACCESS_KEY"); v != "" && !given["bird-access-key"] {
		cfg.BirdAccessKey = v
	}
	if v := os.Getenv("SENDY_TOKEN"); v != "" && !given["sendy-token"] {
		cfg.SendyToken = v
	}

	log, err := logging.New(logging.Options{Format: logging.Format(*logFormat)})
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	cfg.Logger = log
	sim, err := simulator.New(cfg)
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
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	return l.Close()
}
