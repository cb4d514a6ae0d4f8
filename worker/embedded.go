//go:build !nodevstack && !race

package main

import (
	"github.com/acme/smsorch/app"
	"github.com/acme/smsorch/internal/devstack"
)

// This worker holds the embedded Temporal server and web UI, for --dev,
// --server-only and --ui-only; built with -tags nodevstack (as the
// image's worker is) it has neither, and refuses those modes.
func init() { app.UseEmbedded(devstack.Embed) }
