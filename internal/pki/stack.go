package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// A stack's certificates, as `smsctl certs` makes them for
// docker-compose.yml: a CA and an admin's certificate in DIR/ca (only the
// certs service mounts it), and for each service a directory holding
// ca.pem, cert.pem and key.pem, so that each service mounts its own
// directory and nothing else.
const (
	CADir = "ca"
	// The files in each service's directory.
	CAFile   = "ca.pem"
	CertFile = "cert.pem"
	KeyFile  = "key.pem"
)

// StackCert is one certificate of a stack.
type StackCert struct {
	// Dir is the directory under the stack's, its files CertFile and
	// KeyFile beside the CA's certificate.
	Dir string
	// Roles are its OUs; Server makes it the servers' certificate
	// (serverAuth and clientAuth, for the names given to EnsureStack).
	Roles  []string
	Server bool
}

// StackCerts are the certificates docker-compose.yml gives its services:
// the Temporal servers', the workers' (worker), the intake's (a worker
// that starts runs), the web UI's (an operator's: it reads and
// decides), and an admin's in the CA's directory, for the person who
// runs the cluster.
var StackCerts = []StackCert{
	{Dir: "temporal", Server: true},
	{Dir: "worker", Roles: []string{RoleWorker}},
	{Dir: "intake", Roles: []string{RoleWorker, RoleIntake}},
	{Dir: "ui", Roles: []string{RoleOperator}},
	{Dir: CADir, Roles: []string{RoleAdmin}},
}

// Renewal is how long before its end a certificate is made anew.
const Renewal = 30 * 24 * time.Hour

// Made says what EnsureStack did with one certificate.
type Made struct {
	Path     string // the certificate's file
	New      bool   // made now (else kept)
	NotAfter time.Time
}

// EnsureStack makes what is missing of a stack's certificates in dir,
// and keeps what is there: a CA valid for caValidity, and the
// certificates of StackCerts valid for validity, made anew when missing,
// not signed by the CA, for other names or roles, or within Renewal of
// their end. names are the DNS names of the servers (the first is the
// one clients check).
func EnsureStack(dir string, names []string, caValidity, validity time.Duration, now time.Time) ([]Made, error) {
	if len(names) == 0 {
		return nil, errors.New("the servers' certificate needs a DNS name: the name clients reach Temporal by (docker-compose.yml: temporal)")
	}
	if validity <= Renewal {
		return nil, fmt.Errorf("a certificate valid for %s would be made anew at every start: give more than %s", validity, Renewal)
	}
	caPath, caKeyPath := filepath.Join(dir, CADir, CAFile), filepath.Join(dir, CADir, "ca-key.pem")
	var made []Made
	ca, caKey, err := loadCA(caPath, caKeyPath)
	if errors.Is(err, fs.ErrNotExist) {
		if ca, caKey, err = newCA(caPath, caKeyPath, now, caValidity); err != nil {
			return nil, fmt.Errorf("make the CA in %s: %w", filepath.Dir(caPath), err)
		}
		made = append(made, Made{Path: caPath, New: true, NotAfter: ca.NotAfter})
	} else if err != nil {
		return nil, err
	} else {
		made = append(made, Made{Path: caPath, NotAfter: ca.NotAfter})
	}
	caPEM, err := os.ReadFile(caPath)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, sc := range StackCerts {
		d := filepath.Join(dir, sc.Dir)
		if err := os.MkdirAll(d, 0o700); err != nil {
			return made, err
		}
		if sc.Dir != CADir {
			if err := writeFile(filepath.Join(d, CAFile), caPEM); err != nil {
				return made, err
			}
		}
		certPath, keyPath := filepath.Join(d, CertFile), filepath.Join(d, KeyFile)
		if sc.Dir == CADir {
			certPath, keyPath = filepath.Join(d, "admin.pem"), filepath.Join(d, "admin-key.pem")
		}
		usages := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		subject := pkix.Name{CommonName: sc.Dir, OrganizationalUnit: sc.Roles}
		var dns []string
		if sc.Server {
			usages = append(usages, x509.ExtKeyUsageServerAuth)
			subject.CommonName, dns = names[0], names
		}
		if sc.Dir == CADir {
			subject.CommonName = "admin"
		}
		if have, ok := current(certPath, keyPath, pool, subject, dns, now); ok {
			made = append(made, Made{Path: certPath, NotAfter: have.NotAfter})
			continue
		}
		notAfter := now.Add(validity)
		if notAfter.After(ca.NotAfter) {
			notAfter = ca.NotAfter
		}
		iss := issuer{dir: d, ca: ca, key: caKey, notAfter: notAfter}
		if err := iss.write(certPath, keyPath, subject, usages, dns, nil); err != nil {
			return made, fmt.Errorf("make %s: %w", certPath, err)
		}
		made = append(made, Made{Path: certPath, New: true, NotAfter: notAfter})
	}
	return made, nil
}

// current is the certificate at path when it can stay: it loads with
// its key, the CA signed it, its subject and names are as wanted, and it
// is not within Renewal of its end.
func current(path, keyPath string, pool *x509.CertPool, subject pkix.Name, dns []string, now time.Time) (*x509.Certificate, bool) {
	c, err := readCert(path)
	if err != nil {
		return nil, false
	}
	if _, err := os.Stat(keyPath); err != nil {
		return nil, false
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, false
	}
	// The OUs as a set: DER sorts a SET OF by its encoding.
	have, want := slices.Sorted(slices.Values(c.Subject.OrganizationalUnit)), slices.Sorted(slices.Values(subject.OrganizationalUnit))
	if c.Subject.CommonName != subject.CommonName || !slices.Equal(have, want) || !slices.Equal(c.DNSNames, dns) {
		return nil, false
	}
	return c, c.NotAfter.Sub(now) > Renewal
}

func loadCA(certPath, keyPath string) (*x509.Certificate, any, error) {
	ca, err := readCert(certPath)
	if err != nil {
		return nil, nil, err
	}
	b, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, fmt.Errorf("the CA %s is there without its key: %w", certPath, err)
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, nil, fmt.Errorf("the CA key %s holds no PEM block", keyPath)
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("the CA key %s: %w", keyPath, err)
	}
	return ca, key, nil
}

func newCA(certPath, keyPath string, now time.Time, validity time.Duration) (*x509.Certificate, any, error) {
	if err := os.MkdirAll(filepath.Dir(certPath), 0o700); err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "smsorch CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	if err := writePEM(keyPath, "PRIVATE KEY", keyDER); err != nil {
		return nil, nil, err
	}
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	return ca, key, err
}
