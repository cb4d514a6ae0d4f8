//go:build !nodevstack && race

package main

import (
	"github.com/acme/smsorch/app"
	"github.com/acme/smsorch/internal/stackproc"
)

// Built with -race, this worker runs the embedded Temporal server and web
// UI in a child process built from this module without it (package
// devstack builds without -race only); run it from the repository.
func init() { app.UseEmbedded(stackproc.Start) }
