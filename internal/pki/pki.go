// Package pki makes the certificates a Temporal with mutual TLS needs: a
// CA, a certificate the servers share (serverAuth and clientAuth, for the
// frontend and the connections between servers), and client certificates
// for the workers, the web UI and the tools. The drill and the tests use
// it; a deployment brings its own CA.
//
// A client certificate names what its holder may do as roles, in the
// organizational units (OU) of its subject; the embedded Temporal
// server's authorizer grants each role the least it needs (package
// devstack, docs/security.md).
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The roles a client certificate can carry, each as an OU of its subject.
const (
	// RoleWorker polls the namespace's task queues and completes tasks.
	RoleWorker = "smsorch-worker"
	// RoleIntake starts SendSMS runs and reads them.
	RoleIntake = "smsorch-intake"
	// RoleOperator reads runs and sends them decisions (signals, updates).
	RoleOperator = "smsorch-operator"
	// RoleAdmin may call anything: namespace settings, terminate, reset.
	RoleAdmin = "smsorch-admin"
	// RoleServer is a Temporal server of the cluster: it alone reaches
	// the services between the servers, and is the admin at the
	// frontend. Servers that share one certificate need not name it.
	RoleServer = "smsorch-server"
)

// Roles are every role, least to most.
var Roles = []string{RoleWorker, RoleIntake, RoleOperator, RoleAdmin}

// Files are the PEM files Generate wrote.
type Files struct {
	CA, CAKey             string // the CA's certificate and key
	ServerCert, ServerKey string // the servers' certificate and key
	ClientCert, ClientKey string // a client's certificate and key
}

// Generate writes a new CA into dir, a server certificate for the DNS
// names and IPs given (the first name is the one clients check), and a
// client certificate named client with the roles given, all valid for a
// day.
func Generate(dir string, names []string, ips []net.IP, client string, roles ...string) (Files, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Files{}, err
	}
	now := time.Now()
	f := Files{CA: filepath.Join(dir, "ca.pem"), CAKey: filepath.Join(dir, "ca-key.pem")}
	ca, caKey, err := newCA(f.CA, f.CAKey, now, 24*time.Hour)
	if err != nil {
		return f, err
	}
	cn := "temporal"
	if len(names) > 0 {
		cn = names[0]
	}
	iss := issuer{dir: dir, ca: ca, key: caKey, notAfter: now.Add(24 * time.Hour)}
	f.ServerCert, f.ServerKey, err = iss.leaf("server", pkix.Name{CommonName: cn}, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, names, ips)
	if err != nil {
		return f, fmt.Errorf("make the server certificate: %w", err)
	}
	f.ClientCert, f.ClientKey, err = iss.leaf(client, pkix.Name{CommonName: client, OrganizationalUnit: roles}, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, nil)
	if err != nil {
		return f, fmt.Errorf("make the client certificate: %w", err)
	}
	return f, nil
}

// Issue writes into the CA's directory a client certificate named name
// with the roles given, signed by the CA of f, valid for a day, and
// returns f with it as the client's.
func (f Files) Issue(name string, roles ...string) (Files, error) {
	ca, key, err := loadCA(f.CA, f.CAKey)
	if err != nil {
		return f, fmt.Errorf("the CA %s: %w", f.CA, err)
	}
	iss := issuer{dir: filepath.Dir(f.CA), ca: ca, key: key, notAfter: time.Now().Add(24 * time.Hour)}
	f.ClientCert, f.ClientKey, err = iss.leaf(name, pkix.Name{CommonName: name, OrganizationalUnit: roles}, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, nil)
	if err != nil {
		return f, fmt.Errorf("make the client certificate %s: %w", name, err)
	}
	return f, nil
}

// issuer signs certificates with a CA and writes them into dir.
type issuer struct {
	dir      string
	ca       *x509.Certificate
	key      any
	notAfter time.Time
}

func (iss issuer) leaf(name string, subject pkix.Name, usages []x509.ExtKeyUsage, dns []string, ips []net.IP) (string, string, error) {
	cert, keyFile := filepath.Join(iss.dir, name+".pem"), filepath.Join(iss.dir, name+"-key.pem")
	return cert, keyFile, iss.write(cert, keyFile, subject, usages, dns, ips)
}

// write signs a new certificate and writes it and its key.
func (iss issuer) write(cert, keyFile string, subject pkix.Name, usages []x509.ExtKeyUsage, dns []string, ips []net.IP) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: subject,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: iss.notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usages, DNSNames: dns, IPAddresses: ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, iss.ca, &key.PublicKey, iss.key)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	// The key first: a certificate is only ever beside its own key.
	if err := writePEM(keyFile, "PRIVATE KEY", keyDER); err != nil {
		return err
	}
	return writePEM(cert, "CERTIFICATE", der)
}

func readCert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return x509.ParseCertificate(block.Bytes)
}

// ClientTLS is the client's settings for a Go client: its certificate,
// the CA as the root, and serverName as the name to check.
func (f Files) ClientTLS(serverName string) (*tls.Config, error) {
	pair, err := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
	if err != nil {
		return nil, fmt.Errorf("load the client certificate %s: %w", f.ClientCert, err)
	}
	ca, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("the CA file %s holds no certificate", f.CA)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}, nil
}

// Env is the client's settings as the temporal CLI and the workers read
// them; serverName is the name to check in the servers' certificate.
func (f Files) Env(serverName string) []string {
	return []string{
		"TEMPORAL_TLS_CLIENT_CERT_PATH=" + f.ClientCert,
		"TEMPORAL_TLS_CLIENT_KEY_PATH=" + f.ClientKey,
		"TEMPORAL_TLS_SERVER_CA_CERT_PATH=" + f.CA,
		"TEMPORAL_TLS_SERVER_NAME=" + serverName,
	}
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

func writePEM(path, kind string, der []byte) error {
	return writeFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}))
}

// writeFile replaces path with b (mode 0600) at once: a process that
// reads it meanwhile sees the old file or the new one.
func writeFile(path string, b []byte) error {
	tmp := path + ".new"
	_ = os.Remove(tmp) // one left by a crash may have another mode
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
