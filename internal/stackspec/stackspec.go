// Package stackspec says what a process asks of its embedded Temporal
// stack (the server and web UI of dev, server-only and ui-only modes),
// and what it gets back, without the server itself: the worker runs
// the stack in its own process (package devstack), the tests in a child
// process built without the race detector (package stackproc).
package stackspec

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"

	"go.uber.org/zap"
)

// Request is what a process asks of its embedded stack.
type Request struct {
	// UIOnly serves the web UI alone, for the Temporal at UIFrontend.
	UIOnly bool `json:"uiOnly,omitempty"`
	// FrontendAddress and UIAddress are host:port (port 0: a free one);
	// UIAddress "off" starts no UI.
	FrontendAddress string `json:"frontendAddress,omitempty"`
	UIAddress       string `json:"uiAddress,omitempty"`
	// DataDir holds the SQLite file when Database is "".
	DataDir string `json:"dataDir,omitempty"`
	// Database is a postgres:// DSN, "" for SQLite in DataDir.
	Database string `json:"database,omitempty"`
	// BroadcastAddress is the IP the other servers of a cluster reach
	// this one on.
	BroadcastAddress string `json:"broadcastAddress,omitempty"`
	// TLS makes the server speak mutual TLS (server modes), or is the UI's
	// client certificate towards UIFrontend (ui-only mode).
	TLS *TLS `json:"tls,omitempty"`
	// UIFrontend and Namespace are what a ui-only UI shows.
	UIFrontend string `json:"uiFrontend,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
	// CodecEndpoint is the codec server the UI decodes payloads with.
	CodecEndpoint string `json:"codecEndpoint,omitempty"`
	// APIKeys lets clients prove who they are with an API key instead of
	// a client certificate (server modes, with TLS).
	APIKeys *APIKeys `json:"apiKeys,omitempty"`
	// UILogin puts the web UI behind an OpenID Connect login.
	UILogin *UILogin `json:"uiLogin,omitempty"`
	// UIOrigins are where people open the web UI (http://host:port)
	// besides its own address: it answers for no other Host.
	UIOrigins []string `json:"uiOrigins,omitempty"`
	// WithoutSearchAttributes leaves the project's search attributes
	// unregistered, as on a cluster a worker prepares itself (tests).
	WithoutSearchAttributes bool `json:"withoutSearchAttributes,omitempty"`
}

// Embedded is a running embedded stack: the Temporal server and web UI,
// or the web UI alone.
type Embedded interface {
	// FrontendAddress is the Temporal frontend (the one the UI talks to
	// in ui-only mode).
	FrontendAddress() string
	// ClientTLS is what a client in this process presents to the
	// embedded server, nil when it speaks plain gRPC.
	ClientTLS() *tls.Config
	// UIURL is the web UI's address, "" when it is off.
	UIURL() string
	Namespace() string
	// State says where Temporal keeps its state.
	State() string
	Stop() error
}

// Starter starts an embedded stack and returns once it answers; on error
// nothing is left running.
type Starter func(ctx context.Context, req Request, log *zap.Logger) (Embedded, error)

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
	// AnyClient lets every certificate of the CA call every API. By
	// default the roles a client certificate names (its OUs, package
	// pki) decide what it may call, and the servers' own certificate is
	// the admin.
	AnyClient bool
}

// Load reads the files and says what is wrong with them.
func (t *TLS) Load() (tls.Certificate, *x509.CertPool, string, error) {
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

// LoadClient checks a client's files: its certificate and key, and the
// CA that signed the server's.
func (t *TLS) LoadClient() error {
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

// ClientConfig is what the process's own clients of the server present.
func ClientConfig(cert tls.Certificate, pool *x509.CertPool, name string) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: name, MinVersion: tls.VersionTLS12}
}

// APIKeys are JWTs a client presents as "Authorization: Bearer KEY"
// (TEMPORAL_API_KEY), as on Temporal Cloud: signed by a key of the JSON
// Web Key Set at JWKS, with "sub", "exp" and the roles in the claim
// "smsorch_roles". The frontend then also takes clients without a
// certificate, and a key is refused saying why (expired, wrong signer,
// no roles).
type APIKeys struct {
	// JWKS is where the signing keys are: https://, http:// or file://.
	JWKS string
	// Issuer and Audience, when set, must be the keys' "iss" and "aud".
	Issuer, Audience string
}

// UILogin makes the web UI log people in with an OpenID Connect provider
// before it shows or does anything: its API answers 401 without a
// session, and it calls Temporal with the person's ID token, so that
// what they may do is what the roles in that token allow (the server
// takes the provider's tokens as API keys: APIKeys with the provider's
// key set, issuer, and the client id as audience).
type UILogin struct {
	// Issuer is the provider's issuer URL (its discovery document is at
	// Issuer/.well-known/openid-configuration).
	Issuer string `json:"issuer"`
	// ClientID and ClientSecret are the UI's at the provider.
	ClientID     string `json:"clientId"`
	ClientSecret string `json:"clientSecret"`
	// CallbackURL is where the provider sends the browser back:
	// the UI's public URL with /auth/sso/callback.
	CallbackURL string `json:"callbackUrl"`
}

// EnvRequest is the variable in which a stack started in a child process
// gets its Request, as JSON.
const EnvRequest = "SMSORCH_DEVSTACKD_REQUEST"

// ReadyPrefix starts the line of stdout on which a stack started in a
// child process reports Ready: a line the server printed itself is not
// taken for it.
const ReadyPrefix = "devstackd ready: "

// Ready is what a stack started in a child process reports once it
// answers (package stackproc).
type Ready struct {
	FrontendAddress string `json:"frontendAddress"`
	UIURL           string `json:"uiURL,omitempty"`
	Namespace       string `json:"namespace"`
	State           string `json:"state"`
	// ClientTLS says the server speaks mutual TLS: the parent's clients
	// present the certificate of the Request's TLS files.
	ClientTLS bool `json:"clientTLS,omitempty"`
}
