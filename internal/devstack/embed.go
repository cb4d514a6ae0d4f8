//go:build !race

package devstack

import (
	"context"

	"go.uber.org/zap"

	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/internal/stackspec"
)

// Embed starts the stack req asks for in this process: the Temporal
// server and web UI with the project's search attributes, or the web UI
// alone (req.UIOnly). It is the worker's stackspec.Starter.
func Embed(ctx context.Context, req stackspec.Request, log *zap.Logger) (stackspec.Embedded, error) {
	if req.UIOnly {
		s, err := StartUI(ctx, UIConfig{
			Address: req.UIAddress, Frontend: req.UIFrontend, Namespace: req.Namespace,
			CodecEndpoint: req.CodecEndpoint, Logger: log, TLS: req.TLS, Login: req.UILogin, Hosts: hostsOfURLs(req.UIOrigins...),
		})
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	attrs := contract.SearchAttributes()
	if req.WithoutSearchAttributes {
		attrs = nil
	}
	s, err := Start(ctx, Config{
		TLS: req.TLS, APIKeys: req.APIKeys,
		FrontendAddress: req.FrontendAddress, UIAddress: req.UIAddress, DataDir: req.DataDir,
		Database: req.Database, BroadcastAddress: req.BroadcastAddress,
		SearchAttributes: attrs, Logger: log, CodecEndpoint: req.CodecEndpoint, UILogin: req.UILogin, UIHosts: hostsOfURLs(req.UIOrigins...),
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}
