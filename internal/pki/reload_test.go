package pki

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A certificate renewed in its files is served without a restart; a
// half-written renewal keeps the last pair that loaded.
func TestAReloaderServesTheRenewedCertificate(t *testing.T) {
	dir := t.TempDir()
	first, err := Generate(filepath.Join(dir, "a"), []string{"temporal"}, nil, "worker", RoleWorker)
	require.NoError(t, err)
	second, err := Generate(filepath.Join(dir, "b"), []string{"temporal"}, nil, "worker", RoleWorker)
	require.NoError(t, err)
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	put := func(from Files, at time.Time) {
		for src, dst := range map[string]string{from.ClientCert: cert, from.ClientKey: key} {
			b, err := os.ReadFile(src)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(dst, b, 0o600))
			require.NoError(t, os.Chtimes(dst, at, at))
		}
	}
	serial := func(r *Reloader) string {
		c, err := r.GetClientCertificate(nil)
		require.NoError(t, err)
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		require.NoError(t, err)
		return leaf.SerialNumber.String()
	}
	want := func(f Files) string {
		c, err := readCert(f.ClientCert)
		require.NoError(t, err)
		return c.SerialNumber.String()
	}
	now := time.Now()
	put(first, now)
	r, err := NewReloader(cert, key)
	require.NoError(t, err)
	require.Equal(t, want(first), serial(r))

	put(second, now.Add(time.Minute))
	require.Equal(t, want(second), serial(r), "renewed in place: the new pair")

	// The new certificate written, its key not yet: the last good pair.
	b, err := os.ReadFile(first.ClientCert)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cert, b, 0o600))
	require.NoError(t, os.Chtimes(cert, now.Add(2*time.Minute), now.Add(2*time.Minute)))
	require.Equal(t, want(second), serial(r), "a pair that does not match keeps the last one")
	got, err := r.GetCertificate(nil)
	require.NoError(t, err)
	require.NotNil(t, got)

	_, err = NewReloader(filepath.Join(dir, "missing.pem"), key)
	require.ErrorContains(t, err, "the certificate's files")
}
