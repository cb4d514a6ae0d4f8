// Package pki makes the certificates a Temporal with mutual TLS needs: a
// CA, a certificate the servers share (serverAuth and clientAuth, for the
// frontend and the connections between servers), and client certificates
// for the workers, the web UI and the tools. The drill and the tests use
// it; a deployment brings its own CA.
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

// Files are the PEM files Generate wrote.
type Files struct {
	CA                    string // the CA's certificate
	ServerCert, ServerKey string // the servers' certificate and key
	ClientCert, ClientKey string // a client's certificate and key
}

// Generate writes a new CA into dir, a server certificate for the DNS
// names and IPs given (the first name is the one clients check), and a
// client certificate named client, all valid for a day.
func Generate(dir string, names []string, ips []net.IP, client string) (Files, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Files{}, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Files{}, err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "smsorch test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return Files{}, err
	}
	ca, _ = x509.ParseCertificate(caDER)
	f := Files{CA: filepath.Join(dir, "ca.pem")}
	if err := writePEM(f.CA, "CERTIFICATE", caDER); err != nil {
		return f, err
	}
	leaf := func(name string, cn string, usages []x509.ExtKeyUsage, dns []string, ips []net.IP) (string, string, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return "", "", err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(), Subject: pkix.Name{CommonName: cn},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usages, DNSNames: dns, IPAddresses: ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return "", "", err
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return "", "", err
		}
		cert, keyFile := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		if err := writePEM(cert, "CERTIFICATE", der); err != nil {
			return "", "", err
		}
		return cert, keyFile, writePEM(keyFile, "PRIVATE KEY", keyDER)
	}
	cn := "temporal"
	if len(names) > 0 {
		cn = names[0]
	}
	f.ServerCert, f.ServerKey, err = leaf("server", cn, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, names, ips)
	if err != nil {
		return f, fmt.Errorf("make the server certificate: %w", err)
	}
	f.ClientCert, f.ClientKey, err = leaf(client, client, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, nil)
	if err != nil {
		return f, fmt.Errorf("make the client certificate: %w", err)
	}
	return f, nil
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
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}
