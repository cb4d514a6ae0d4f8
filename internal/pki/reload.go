package pki

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// Reloader serves a certificate and its key from their files, read again
// when either file changes: a certificate renewed in place (cert-manager
// rewriting a mounted Kubernetes Secret, `smsctl certs` at the next
// start of compose's certs service) is used by new connections without a
// restart. A change that does not load (a key written before its
// certificate) keeps the last pair that did until both agree.
type Reloader struct {
	cert, key string
	mu        sync.Mutex
	stamp     [2]fileStamp
	current   *tls.Certificate
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// NewReloader loads the pair now: files that do not load are an error at
// start, not at the first connection.
func NewReloader(certFile, keyFile string) (*Reloader, error) {
	r := &Reloader{cert: certFile, key: keyFile}
	if _, err := r.Certificate(); err != nil {
		return nil, err
	}
	return r, nil
}

// Certificate is the pair as the files hold it now, or the last that
// loaded.
func (r *Reloader) Certificate() (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var now [2]fileStamp
	for i, p := range []string{r.cert, r.key} {
		st, err := os.Stat(p)
		if err != nil {
			if r.current != nil {
				return r.current, nil
			}
			return nil, fmt.Errorf("the certificate's files: %w", err)
		}
		now[i] = fileStamp{st.ModTime(), st.Size()}
	}
	if r.current != nil && now == r.stamp {
		return r.current, nil
	}
	pair, err := tls.LoadX509KeyPair(r.cert, r.key)
	if err != nil {
		if r.current != nil {
			return r.current, nil
		}
		return nil, fmt.Errorf("the certificate %s and key %s do not load: %w", r.cert, r.key, err)
	}
	r.current, r.stamp = &pair, now
	return r.current, nil
}

// GetCertificate serves the pair to a TLS server (tls.Config.GetCertificate).
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.Certificate()
}

// GetClientCertificate presents the pair as a TLS client
// (tls.Config.GetClientCertificate).
func (r *Reloader) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return r.Certificate()
}
