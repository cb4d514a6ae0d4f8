package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
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
	Path     string    `json:"path"` // the certificate's file
	New      bool      `json:"new"`  // made now (else kept)
	NotAfter time.Time `json:"notAfter"`
}

// EnsureStack makes what is missing of a stack's certificates in dir,
// and keeps what is there: a CA valid for caValidity, and the
// certificates of StackCerts valid for validity, made anew when missing,
// not signed by the CA, not matching their key, for other names or
// roles, or within Renewal of their end. names are the DNS names of the
// servers (the first is the one clients check).
//
// A CA brought without its key (ca.pem alone) signs nothing here: every
// certificate must then be there and current, else EnsureStack says which
// is not. A CA within Renewal of its end is refused: its certificates
// would be made anew at every start and then stop working together.
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
	if errors.Is(err, errNoCAKey) {
		return checkStack(dir, ca, names, now)
	}
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
	if ca.NotAfter.Sub(now) <= Renewal {
		return nil, fmt.Errorf("the CA %s ends on %s: make a new one (move %s and %s away; every certificate is then made anew) and restart the services", caPath, ca.NotAfter.UTC().Format("2006-01-02"), CAFile, "ca-key.pem")
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
		if have, ok := current(certPath, keyPath, pool, sc, names, now); ok {
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
// its key, the CA signed it, it names the roles of sc (a servers' one:
// both usages and every name), and it is not within Renewal of its end.
// Its common name is free: a certificate brought from elsewhere keeps
// its own.
func current(path, keyPath string, pool *x509.CertPool, sc StackCert, names []string, now time.Time) (*x509.Certificate, bool) {
	pair, err := tls.LoadX509KeyPair(path, keyPath)
	if err != nil {
		return nil, false
	}
	c, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, false
	}
	usage := x509.ExtKeyUsageClientAuth
	if sc.Server {
		usage = x509.ExtKeyUsageServerAuth
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
		return nil, false
	}
	if sc.Server {
		for _, n := range names {
			if !slices.Contains(c.DNSNames, n) {
				return nil, false
			}
		}
		if len(c.ExtKeyUsage) > 0 && !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
			return nil, false
		}
	} else {
		// The OUs as a set: DER sorts a SET OF by its encoding.
		have, want := slices.Sorted(slices.Values(c.Subject.OrganizationalUnit)), slices.Sorted(slices.Values(sc.Roles))
		if !slices.Equal(have, want) {
			return nil, false
		}
	}
	return c, c.NotAfter.Sub(now) > Renewal
}

// checkStack is EnsureStack for a CA without its key: it says what is
// there, and fails on what is missing or not current.
func checkStack(dir string, ca *x509.Certificate, names []string, now time.Time) ([]Made, error) {
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	made := []Made{{Path: filepath.Join(dir, CADir, CAFile), NotAfter: ca.NotAfter}}
	for _, sc := range StackCerts {
		if sc.Dir == CADir {
			continue // an admin's is the admin's business
		}
		certPath, keyPath := filepath.Join(dir, sc.Dir, CertFile), filepath.Join(dir, sc.Dir, KeyFile)
		c, ok := current(certPath, keyPath, pool, sc, names, now)
		if !ok {
			return made, fmt.Errorf("%s is missing, expired or within 30 days of its end, not signed by the CA %s, not matching %s, or without the roles %v (servers: the names %v): the CA's key is not in %s, so nothing is made here; put a current certificate there", certPath, filepath.Join(dir, CADir, CAFile), keyPath, sc.Roles, names, filepath.Join(dir, CADir))
		}
		made = append(made, Made{Path: certPath, NotAfter: c.NotAfter})
	}
	return made, nil
}

var errNoCAKey = errors.New("the CA's key is not there")

func loadCA(certPath, keyPath string) (*x509.Certificate, any, error) {
	ca, err := readCert(certPath)
	if err != nil {
		return nil, nil, err
	}
	b, err := os.ReadFile(keyPath)
	if errors.Is(err, fs.ErrNotExist) {
		return ca, nil, errNoCAKey
	}
	if err != nil {
		return nil, nil, err
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
