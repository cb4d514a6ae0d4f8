//go:build !race

package devstack

import (
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	"go.temporal.io/server/common/config"

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
