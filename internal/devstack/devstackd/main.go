//go:build !race

// Command devstackd runs the embedded Temporal stack (package devstack)
// as a process of its own, for tests: package stackproc builds it
// without the race detector and starts it, so a test binary built with
// -race neither links the Temporal server nor runs it instrumented.
//
//	devstackd -request '{"frontendAddress":"127.0.0.1:0","dataDir":"/tmp/x"}'
//
// It writes one line to stdout once the stack answers (ReadyPrefix and
// Ready in JSON), logs to stderr, and stops the stack when its stdin
// closes or on SIGTERM.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/acme/smsorch/internal/devstack"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/internal/stackspec"
)

func main() {
	os.Exit(run())
}

func run() int {
	request := flag.String("request", "", "the stack to start: a stackspec.Request as JSON (default $"+stackspec.EnvRequest+", which keeps a secret in it off the command line)")
	level := flag.String("log-level", "info", "debug, info, warn or error")
	flag.Parse()
	if *request == "" {
		*request = os.Getenv(stackspec.EnvRequest)
		_ = os.Unsetenv(stackspec.EnvRequest)
	}
	var req stackspec.Request
	if err := json.Unmarshal([]byte(*request), &req); err != nil {
		fmt.Fprintf(os.Stderr, "devstackd: -request is not a stack request in JSON: %v\n", err)
		return 2
	}
	log, err := logging.New(logging.Options{Level: *level})
	if err != nil {
		fmt.Fprintln(os.Stderr, "devstackd:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// The parent closes stdin to stop the stack, or dies, which closes it
	// too: while the stack starts as well as after.
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	s, err := devstack.Embed(ctx, req, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "devstackd:", err)
		return 1
	}
	ready := stackspec.Ready{FrontendAddress: s.FrontendAddress(), UIURL: s.UIURL(), Namespace: s.Namespace(), State: s.State(), ClientTLS: s.ClientTLS() != nil}
	line, err := json.Marshal(ready)
	if err == nil {
		_, err = fmt.Fprintf(os.Stdout, "%s%s\n", stackspec.ReadyPrefix, line)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "devstackd: tell the parent the stack is ready:", err)
		_ = s.Stop()
		return 1
	}
	<-ctx.Done()
	if err := s.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "devstackd: stop the stack:", err)
		return 1
	}
	return 0
}
