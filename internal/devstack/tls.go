//go:build !race

package devstack

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"

	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	"go.temporal.io/server/common/config"
	serverlog "go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/rpc/encryption"

	"github.com/acme/smsorch/internal/pki"
	"github.com/acme/smsorch/internal/stackspec"
)

// TLS makes the server speak mutual TLS on every port it opens
// (stackspec.TLS).
type TLS = stackspec.TLS

// serverConfig is the server's TLS settings: mutual TLS on the frontend
// and between the services, the system worker a client like any other.
func serverConfig(t *TLS, name string) config.RootTLS {
	server := config.ServerTLS{CertFile: t.CertFile, KeyFile: t.KeyFile, ClientCAFiles: []string{t.CAFile}, RequireClientAuth: true}
	client := config.ClientTLS{ServerName: name, RootCAFiles: []string{t.CAFile}}
	return config.RootTLS{
		Internode:    config.GroupTLS{Server: server, Client: client},
		Frontend:     config.GroupTLS{Server: server, Client: client},
		SystemWorker: config.WorkerTLS{CertFile: t.CertFile, KeyFile: t.KeyFile, Client: client},
	}
}

// uiTLS is the web UI's connection to the frontend.
func uiTLS(cert, key, ca, name string) uiconfig.TLS {
	return uiconfig.TLS{CertFile: cert, KeyFile: key, CaFile: ca, ServerName: name, EnableHostVerification: true}
}

// rolesTLS is the server's TLS with the roles on (access.go). The
// services between the servers (history, matching, the worker service)
// take the servers' own certificate, or one with OU smsorch-admin, and
// no other: the roles are checked at the frontend only, so a worker's
// certificate must not reach history directly. With API keys on, the
// frontend asks a client for its certificate and verifies one that is
// given, but also takes a client without one (its API key then says who
// it is; without either, every call is refused).
func rolesTLS(settings config.RootTLS, self []byte, apiKeys bool, logger serverlog.Logger) (encryption.TLSConfigProvider, error) {
	p, err := encryption.NewTLSConfigProviderFromConfig(settings, metrics.NoopMetricsHandler, logger, nil)
	if err != nil {
		return nil, fmt.Errorf("the Temporal server's TLS settings: %w", err)
	}
	return rolesProvider{TLSConfigProvider: p, self: self, apiKeys: apiKeys}, nil
}

type rolesProvider struct {
	encryption.TLSConfigProvider
	self    []byte
	apiKeys bool
}

func (p rolesProvider) GetFrontendServerConfig() (*tls.Config, error) {
	c, err := p.TLSConfigProvider.GetFrontendServerConfig()
	if err != nil || c == nil || !p.apiKeys {
		return c, err
	}
	return perConnection(c, func(c *tls.Config) {
		if c.ClientAuth == tls.RequireAndVerifyClientCert {
			c.ClientAuth = tls.VerifyClientCertIfGiven
		}
	}), nil
}

func (p rolesProvider) GetInternodeServerConfig() (*tls.Config, error) {
	c, err := p.TLSConfigProvider.GetInternodeServerConfig()
	if err != nil || c == nil {
		return c, err
	}
	return perConnection(c, func(c *tls.Config) { c.VerifyPeerCertificate = serversOnly(p.self) }), nil
}

// serversOnly accepts the servers' own certificate, or one with OU
// smsorch-server (servers of a cluster that do not share one); not an
// admin's, who goes through the frontend like everyone.
func serversOnly(self []byte) func([][]byte, [][]*x509.Certificate) error {
	return func(_ [][]byte, chains [][]*x509.Certificate) error {
		if len(chains) == 0 || len(chains[0]) == 0 {
			return errors.New("the services between Temporal servers take a verified client certificate")
		}
		leaf := chains[0][0]
		if bytes.Equal(leaf.Raw, self) || slices.Contains(leaf.Subject.OrganizationalUnit, pki.RoleServer) {
			return nil
		}
		return fmt.Errorf("the client certificate %q is not a Temporal server's: the services between servers take the servers' own certificate, or one with OU=%s", leaf.Subject.String(), pki.RoleServer)
	}
}

// perConnection applies change to c and to the settings c makes for
// each connection.
func perConnection(c *tls.Config, change func(*tls.Config)) *tls.Config {
	c = c.Clone()
	change(c)
	if per := c.GetConfigForClient; per != nil {
		c.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			cc, err := per(h)
			if err != nil || cc == nil {
				return cc, err
			}
			return perConnection(cc, change), nil
		}
	}
	return c
}
