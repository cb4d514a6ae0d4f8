//go:build !nodevstack

package app

import (
	"context"

	"go.uber.org/zap"

	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/internal/devstack"
)

// embeddedBuilt says this binary holds the embedded server and web UI.
const embeddedBuilt = true

// startEmbedded starts the embedded Temporal server and web UI (dev and
// server-only modes) or the web UI alone (ui-only mode).
func startEmbedded(ctx context.Context, cfg Config, log *zap.Logger, codecEndpoint string) (Embedded, error) {
	if cfg.UIOnly {
		var t *devstack.TLS
		if cfg.envTLSCert != "" || cfg.envTLSKey != "" || cfg.envTLSCA != "" {
			t = &devstack.TLS{CertFile: cfg.envTLSCert, KeyFile: cfg.envTLSKey, CAFile: cfg.envTLSCA, ServerName: cfg.envTLSServerName}
		}
		s, err := devstack.StartUI(ctx, devstack.UIConfig{
			Address: cfg.UIAddress, Frontend: cfg.UIFrontend, Namespace: cfg.uiNamespace(),
			CodecEndpoint: codecEndpoint, Logger: log, TLS: t,
		})
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	var t *devstack.TLS
	if cfg.TemporalTLSCert != "" {
		t = &devstack.TLS{CertFile: cfg.TemporalTLSCert, KeyFile: cfg.TemporalTLSKey, CAFile: cfg.TemporalTLSCA, ServerName: cfg.TemporalTLSServerName}
	}
	s, err := devstack.Start(ctx, devstack.Config{
		TLS:             t,
		FrontendAddress: cfg.FrontendAddress, UIAddress: cfg.UIAddress, DataDir: cfg.DataDir,
		Database: cfg.TemporalDB, BroadcastAddress: cfg.BroadcastAddress,
		SearchAttributes: contract.SearchAttributes(), Logger: log, CodecEndpoint: codecEndpoint,
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// uiNamespace is the namespace a ui-only UI opens: $TEMPORAL_NAMESPACE,
// else the default.
func (c Config) uiNamespace() string {
	if c.envTemporalNamespace != "" {
		return c.envTemporalNamespace
	}
	return devstack.DefaultNamespace
}
