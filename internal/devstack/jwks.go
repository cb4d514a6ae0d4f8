//go:build !race

package devstack

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"go.uber.org/zap"
)

// jwks holds the public keys that sign API keys, by kid: read at start
// (the stack does not start without one), then every refresh. A refresh
// that fails keeps the keys it had and logs why.
type jwks struct {
	uri    string
	client *http.Client
	log    *zap.Logger

	mu   sync.RWMutex
	keys map[string]any // *ecdsa.PublicKey (P-256) or *rsa.PublicKey

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// jwksTimeout bounds one fetch of the key set.
const jwksTimeout = 10 * time.Second

// checkJWKSURI accepts https://, file:// with an absolute path, and
// http:// on a loopback host only: keys fetched in plain over a network
// could be swapped on the way for keys an attacker signs with.
func checkJWKSURI(uri string) error {
	u, err := url.Parse(uri)
	if err != nil {
		return fmt.Errorf("the JWKS of the API keys %q is not a URL: %w", uri, err)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "file":
		if u.Host != "" || !path.IsAbs(u.Path) {
			return fmt.Errorf("the JWKS of the API keys %q is not file:///ABSOLUTE/PATH", uri)
		}
		return nil
	case "http":
		if ip := net.ParseIP(u.Hostname()); (ip != nil && ip.IsLoopback()) || u.Hostname() == "localhost" {
			return nil
		}
		return fmt.Errorf("the JWKS of the API keys %q is plain HTTP off loopback: whoever is on the way could swap the keys; use https://", uri)
	}
	return fmt.Errorf("the JWKS of the API keys %q is not an https://, file:// or loopback http:// URL", uri)
}

// openJWKS reads the key set at uri and refreshes it every interval
// until Close.
func openJWKS(ctx context.Context, uri string, interval time.Duration, log *zap.Logger) (*jwks, error) {
	j := &jwks{uri: uri, client: &http.Client{Timeout: jwksTimeout}, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	fctx, cancel := context.WithTimeout(ctx, jwksTimeout)
	defer cancel()
	if err := j.refresh(fctx); err != nil {
		return nil, fmt.Errorf("read the API keys' signing keys: %w", err)
	}
	go j.loop(interval)
	return j, nil
}

func (j *jwks) loop(interval time.Duration) {
	defer close(j.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-j.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), jwksTimeout)
			if err := j.refresh(ctx); err != nil {
				j.log.Warn("the API keys' signing keys could not be read again; the ones read before stay", zap.String("jwks", j.uri), zap.Error(err))
			}
			cancel()
		}
	}
}

// Close stops the refreshes; it is safe to call more than once.
func (j *jwks) Close() {
	j.once.Do(func() {
		close(j.stop)
		<-j.done
	})
}

func (j *jwks) refresh(ctx context.Context) error {
	body, err := j.read(ctx)
	if err != nil {
		return err
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return fmt.Errorf("the JWKS at %s is not a JSON Web Key Set: %w", j.uri, err)
	}
	keys := map[string]any{}
	for _, k := range set.Keys {
		switch pub := k.Key.(type) {
		case *ecdsa.PublicKey:
			if pub.Curve == elliptic.P256() {
				keys[k.KeyID] = pub
			}
		case *rsa.PublicKey:
			keys[k.KeyID] = pub
		}
	}
	if len(keys) == 0 {
		return fmt.Errorf("the JWKS at %s holds no public key for ES256 (P-256) or RS256", j.uri)
	}
	j.mu.Lock()
	j.keys = keys
	j.mu.Unlock()
	return nil
}

func (j *jwks) read(ctx context.Context) ([]byte, error) {
	u, err := url.Parse(j.uri)
	if err != nil {
		return nil, err
	}
	if u.Scheme == "file" {
		return os.ReadFile(u.Path)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.uri, nil)
	if err != nil {
		return nil, err
	}
	resp, err := j.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", j.uri, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 1<<20))
}

// key is the public key kid names, of the kind alg needs.
func (j *jwks) key(alg, kid string) (any, error) {
	j.mu.RLock()
	k, ok := j.keys[kid]
	j.mu.RUnlock()
	if !ok {
		return nil, errors.New("its signing key (kid) is not in the JWKS")
	}
	switch k.(type) {
	case *ecdsa.PublicKey:
		if alg == "ES256" {
			return k, nil
		}
	case *rsa.PublicKey:
		if alg == "RS256" {
			return k, nil
		}
	}
	return nil, fmt.Errorf("it is signed with %s, which its signing key is not for (ES256 and RS256 are taken)", truncate(alg))
}
