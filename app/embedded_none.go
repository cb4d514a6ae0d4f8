//go:build nodevstack

package app

import (
	"context"
	"errors"

	"go.uber.org/zap"
)

// embeddedBuilt says this binary holds the embedded server and web UI:
// a worker built with -tags nodevstack does not.
const embeddedBuilt = false

func startEmbedded(context.Context, Config, *zap.Logger, string) (Embedded, error) {
	return nil, errors.New(noEmbedded)
}
