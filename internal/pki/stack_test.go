package pki

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The first start makes the CA and every service's certificate; the next
// keeps them; a certificate near its end, for other names, or gone is
// made anew under the same CA, and nothing else changes.
func TestEnsureStackMakesWhatIsMissingAndKeepsTheRest(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	const year = 365 * 24 * time.Hour
	made, err := EnsureStack(dir, []string{"temporal"}, 10*year, year, now)
	require.NoError(t, err)
	require.Len(t, made, 1+len(StackCerts))
	for _, m := range made {
		require.True(t, m.New, m.Path)
	}
	for _, sc := range StackCerts {
		d := filepath.Join(dir, sc.Dir)
		if sc.Dir == CADir {
			continue
		}
		for _, f := range []string{CAFile, CertFile, KeyFile} {
			st, err := os.Stat(filepath.Join(d, f))
			require.NoError(t, err)
			require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "%s/%s is its service's alone", sc.Dir, f)
		}
		_, err := tls.LoadX509KeyPair(filepath.Join(d, CertFile), filepath.Join(d, KeyFile))
		require.NoError(t, err, sc.Dir)
		c, err := readCert(filepath.Join(d, CertFile))
		require.NoError(t, err)
		require.ElementsMatch(t, sc.Roles, c.Subject.OrganizationalUnit, sc.Dir)
	}
	server, err := readCert(filepath.Join(dir, "temporal", CertFile))
	require.NoError(t, err)
	require.Equal(t, []string{"temporal"}, server.DNSNames)
	_, err = os.Stat(filepath.Join(dir, "worker", "ca-key.pem"))
	require.ErrorIs(t, err, os.ErrNotExist, "the CA's key stays in the CA's directory")
	admin, err := readCert(filepath.Join(dir, CADir, "admin.pem"))
	require.NoError(t, err)
	require.Equal(t, []string{RoleAdmin}, admin.Subject.OrganizationalUnit)

	again, err := EnsureStack(dir, []string{"temporal"}, 10*year, year, now.Add(time.Hour))
	require.NoError(t, err)
	for _, m := range again {
		require.False(t, m.New, "%s is kept", m.Path)
	}

	// Near its end, every leaf is made anew; the CA stays.
	late, err := EnsureStack(dir, []string{"temporal"}, 10*year, year, now.Add(year-Renewal+time.Hour))
	require.NoError(t, err)
	require.False(t, late[0].New, "the CA is kept")
	for _, m := range late[1:] {
		require.True(t, m.New, "%s is renewed", m.Path)
	}
	ca, err := readCert(filepath.Join(dir, CADir, CAFile))
	require.NoError(t, err)
	worker, err := readCert(filepath.Join(dir, "worker", CertFile))
	require.NoError(t, err)
	require.NoError(t, worker.CheckSignatureFrom(ca), "renewed under the same CA")

	// Other names make the servers' certificate anew, and only it.
	require.NoError(t, os.Remove(filepath.Join(dir, "ui", KeyFile)))
	renamed, err := EnsureStack(dir, []string{"temporal", "temporal.example.com"}, 10*year, year, now.Add(year-Renewal+2*time.Hour))
	require.NoError(t, err)
	for _, m := range renamed {
		want := m.Path == filepath.Join(dir, "temporal", CertFile) || m.Path == filepath.Join(dir, "ui", CertFile)
		require.Equal(t, want, m.New, m.Path)
	}

	_, err = EnsureStack(t.TempDir(), nil, 10*year, year, now)
	require.ErrorContains(t, err, "needs a DNS name")
	_, err = EnsureStack(t.TempDir(), []string{"temporal"}, 10*year, Renewal, now)
	require.ErrorContains(t, err, "would be made anew at every start")
}
