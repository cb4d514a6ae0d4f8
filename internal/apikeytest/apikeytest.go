// Package apikeytest issues API keys for tests: an ES256 signing key,
// the JSON Web Key Set that holds its public half, served on loopback,
// and keys (JWTs) signed by it or by a stranger's key.
package apikeytest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"github.com/golang-jwt/jwt/v4"
	"github.com/stretchr/testify/require"
)

// Issuer signs API keys; URL serves its key set until the test ends.
type Issuer struct {
	URL string
	// Key signs; Stranger is a key the set does not hold.
	Key, Stranger *ecdsa.PrivateKey
	KID           string
}

// New makes an issuer whose key set names its key kid.
func New(t testing.TB, kid string) *Issuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	stranger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	set, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: kid, Algorithm: "ES256", Use: "sig"}}})
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(set) }))
	t.Cleanup(srv.Close)
	return &Issuer{URL: srv.URL + "/jwks.json", Key: key, Stranger: stranger, KID: kid}
}

// Sign is a key with claims, signed by key with the issuer's kid.
func (i *Issuer) Sign(t testing.TB, key *ecdsa.PrivateKey, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, claims)
	tok.Header["kid"] = i.KID
	s, err := tok.SignedString(key)
	require.NoError(t, err)
	return s
}
