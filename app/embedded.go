package app

import (
	"context"
	"errors"
	"sync"

	"go.uber.org/zap"

	"github.com/acme/smsorch/internal/devstack/defaults"
	"github.com/acme/smsorch/internal/stackspec"
)

// Embedded is the Temporal server and web UI a process runs itself: in
// dev and server-only modes both, in ui-only mode the web UI alone. A
// worker built with -tags nodevstack has neither.
type Embedded = stackspec.Embedded

var (
	embeddedMu      sync.RWMutex
	embeddedStarter stackspec.Starter
)

// UseEmbedded gives the process what starts its embedded stack: the
// worker's main gives the in-process server (package devstack) unless it
// is built with -tags nodevstack; tests give one that runs it in a child
// process. Without one, --dev, --server-only and --ui-only are refused.
func UseEmbedded(s stackspec.Starter) {
	embeddedMu.Lock()
	defer embeddedMu.Unlock()
	embeddedStarter = s
}

// embeddedBuilt says this process can start an embedded stack.
func embeddedBuilt() bool {
	embeddedMu.RLock()
	defer embeddedMu.RUnlock()
	return embeddedStarter != nil
}

// startEmbedded starts the embedded Temporal server and web UI (dev and
// server-only modes) or the web UI alone (ui-only mode).
func startEmbedded(ctx context.Context, cfg Config, log *zap.Logger, codecEndpoint string) (Embedded, error) {
	embeddedMu.RLock()
	start := embeddedStarter
	embeddedMu.RUnlock()
	if start == nil {
		return nil, errors.New(noEmbedded)
	}
	return start(ctx, cfg.embeddedRequest(codecEndpoint), log)
}

// embeddedRequest is what the mode asks of the embedded stack.
func (c Config) embeddedRequest(codecEndpoint string) stackspec.Request {
	if c.UIOnly {
		req := stackspec.Request{UIOnly: true, UIAddress: c.UIAddress, UIFrontend: c.UIFrontend, Namespace: c.uiNamespace(), CodecEndpoint: codecEndpoint, UILogin: c.uiLogin(), UIOrigins: c.CodecUIOrigins}
		if c.envTLSCert != "" || c.envTLSKey != "" || c.envTLSCA != "" {
			req.TLS = &stackspec.TLS{CertFile: c.envTLSCert, KeyFile: c.envTLSKey, CAFile: c.envTLSCA, ServerName: c.envTLSServerName}
		}
		return req
	}
	req := stackspec.Request{
		FrontendAddress: c.FrontendAddress, UIAddress: c.UIAddress, DataDir: c.DataDir,
		Database: c.TemporalDB, BroadcastAddress: c.BroadcastAddress, CodecEndpoint: codecEndpoint, UILogin: c.uiLogin(), UIOrigins: c.CodecUIOrigins,
	}
	if c.TemporalTLSCert != "" {
		req.TLS = &stackspec.TLS{CertFile: c.TemporalTLSCert, KeyFile: c.TemporalTLSKey, CAFile: c.TemporalTLSCA, ServerName: c.TemporalTLSServerName, AnyClient: c.TemporalTLSAnyClient}
	}
	if c.TemporalAPIKeysJWKS != "" {
		req.APIKeys = &stackspec.APIKeys{JWKS: c.TemporalAPIKeysJWKS, Issuer: c.TemporalAPIKeysIssuer, Audience: c.TemporalAPIKeysAudience}
	}
	return req
}

// uiNamespace is the namespace a ui-only UI opens: $TEMPORAL_NAMESPACE,
// else the default.
func (c Config) uiNamespace() string {
	if c.envTemporalNamespace != "" {
		return c.envTemporalNamespace
	}
	return defaults.Namespace
}

// uiLogin is the web UI's OpenID Connect login, nil for none.
func (c Config) uiLogin() *stackspec.UILogin {
	if c.UIOIDCIssuer == "" {
		return nil
	}
	return &stackspec.UILogin{Issuer: c.UIOIDCIssuer, ClientID: c.UIOIDCClientID, ClientSecret: c.UIOIDCClientSecret.Reveal(), CallbackURL: c.UIOIDCCallbackURL}
}
