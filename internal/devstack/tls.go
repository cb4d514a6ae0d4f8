package devstack

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"

	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	"go.temporal.io/server/common/config"
)

// TLS makes the server speak mutual TLS on every port it opens: the
// frontend, and the connections between the services and the servers of
// a cluster. A client (a worker, the web UI, the temporal CLI) must then
// present a certificate signed by CAFile; one without is refused before
// it can call anything.
type TLS struct {
	// CertFile and KeyFile are this server's certificate and key (PEM).
	// The certificate serves as the server's and as the client's, towards
	// the other services and servers: it needs both extended key usages
	// (serverAuth and clientAuth), or none.
	CertFile, KeyFile string
	// CAFile is the certificate (PEM) of the CA that signed every server's
	// and every client's certificate.
	CAFile string
	// ServerName is the name clients check in the servers' certificates;
	// default the certificate's first DNS name. Several servers of one
	// cluster share it, so they may share one certificate.
	ServerName string
}

// load reads the files and says what is wrong with them.
func (t *TLS) load() (tls.Certificate, *x509.CertPool, string, error) {
	if t.CertFile == "" || t.KeyFile == "" || t.CAFile == "" {
		return tls.Certificate{}, nil, "", errors.New("mutual TLS needs the server's certificate, its key and the CA's certificate: give all three files")
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return cert, nil, "", fmt.Errorf("the Temporal server's TLS certificate %s and key %s do not load: %w", t.CertFile, t.KeyFile, err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return cert, nil, "", fmt.Errorf("the Temporal server's TLS certificate %s does not parse: %w", t.CertFile, err)
	}
	usages := leaf.ExtKeyUsage
	if len(usages) > 0 && !(slices.Contains(usages, x509.ExtKeyUsageServerAuth) && slices.Contains(usages, x509.ExtKeyUsageClientAuth)) {
		return cert, nil, "", fmt.Errorf("the Temporal server's TLS certificate %s serves the server and its clients to the other services: give it both extended key usages, serverAuth and clientAuth", t.CertFile)
	}
	pool, err := readCA(t.CAFile)
	if err != nil {
		return cert, nil, "", err
	}
	name := t.ServerName
	if name == "" && len(leaf.DNSNames) > 0 {
		name = leaf.DNSNames[0]
	}
	opts := x509.VerifyOptions{Roots: pool, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if _, err := leaf.Verify(opts); err != nil {
		return cert, nil, "", fmt.Errorf("the Temporal server's TLS certificate %s does not verify against the CA %s for the name %q its clients check: %w", t.CertFile, t.CAFile, name, err)
	}
	return cert, pool, name, nil
}

// loadClient checks a client's files: its certificate and key, and the
// CA that signed the server's.
func (t *TLS) loadClient() error {
	if t.CertFile == "" || t.KeyFile == "" || t.CAFile == "" {
		return errors.New("the web UI reaches a Temporal that requires mutual TLS with a client certificate, its key and the CA's certificate: set all three (TEMPORAL_TLS_CLIENT_CERT_PATH, TEMPORAL_TLS_CLIENT_KEY_PATH, TEMPORAL_TLS_SERVER_CA_CERT_PATH)")
	}
	if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
		return fmt.Errorf("the web UI's TLS client certificate %s and key %s do not load: %w", t.CertFile, t.KeyFile, err)
	}
	_, err := readCA(t.CAFile)
	return err
}

// readCA reads the certificates of a CA file into a pool.
func readCA(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the CA certificate %s: %w", path, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("the CA certificate %s holds no PEM certificate", path)
	}
	return pool, nil
}

// serverConfig is the server's TLS settings: mutual TLS on the frontend
// and between the services, the system worker a client like any other.
func (t *TLS) serverConfig(name string) config.RootTLS {
	server := config.ServerTLS{CertFile: t.CertFile, KeyFile: t.KeyFile, ClientCAFiles: []string{t.CAFile}, RequireClientAuth: true}
	client := config.ClientTLS{ServerName: name, RootCAFiles: []string{t.CAFile}}
	return config.RootTLS{
		Internode:    config.GroupTLS{Server: server, Client: client},
		Frontend:     config.GroupTLS{Server: server, Client: client},
		SystemWorker: config.WorkerTLS{CertFile: t.CertFile, KeyFile: t.KeyFile, Client: client},
	}
}

// clientConfig is what the process's own clients of the server present.
func clientConfig(cert tls.Certificate, pool *x509.CertPool, name string) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: name, MinVersion: tls.VersionTLS12}
}

// uiTLS is the web UI's connection to the frontend.
func uiTLS(cert, key, ca, name string) uiconfig.TLS {
	return uiconfig.TLS{CertFile: cert, KeyFile: key, CaFile: ca, ServerName: name, EnableHostVerification: true}
}
