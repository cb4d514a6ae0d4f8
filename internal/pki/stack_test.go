package pki

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
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

// What the review of the first version found: a CA brought without its
// key is never replaced, a certificate beside another key is made anew,
// one brought with its own common name is kept, and a CA near its end is
// refused.
func TestEnsureStackKeepsABroughtCAAndRefusesWhatCannotWork(t *testing.T) {
	const year = 365 * 24 * time.Hour
	now := time.Now()
	dir := t.TempDir()
	_, err := EnsureStack(dir, []string{"temporal"}, 10*year, year, now)
	require.NoError(t, err)
	st, err := os.Stat(filepath.Join(dir, CADir, "ca-key.pem"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	// A worker's certificate with a key that is not its own is made anew.
	other := t.TempDir()
	_, err = EnsureStack(other, []string{"temporal"}, 10*year, year, now)
	require.NoError(t, err)
	key, err := os.ReadFile(filepath.Join(other, "worker", KeyFile))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "worker", KeyFile), key, 0o600))
	made, err := EnsureStack(dir, []string{"temporal"}, 10*year, year, now)
	require.NoError(t, err)
	for _, m := range made {
		require.Equal(t, m.Path == filepath.Join(dir, "worker", CertFile), m.New, m.Path)
	}

	// One brought with a common name of its own, signed by the CA, with
	// the role, is kept.
	ca, caKey, err := loadCA(filepath.Join(dir, CADir, CAFile), filepath.Join(dir, CADir, "ca-key.pem"))
	require.NoError(t, err)
	iss := issuer{dir: dir, ca: ca, key: caKey, notAfter: now.Add(year)}
	require.NoError(t, iss.write(filepath.Join(dir, "worker", CertFile), filepath.Join(dir, "worker", KeyFile),
		pkix.Name{CommonName: "worker-1", OrganizationalUnit: []string{RoleWorker}}, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, nil))
	made, err = EnsureStack(dir, []string{"temporal"}, 10*year, year, now)
	require.NoError(t, err)
	for _, m := range made {
		require.False(t, m.New, "%s is kept", m.Path)
	}

	// Without the CA's key nothing is made, and nothing replaced: what is
	// there and current passes, what is missing is named.
	require.NoError(t, os.Remove(filepath.Join(dir, CADir, "ca-key.pem")))
	caBefore, err := os.ReadFile(filepath.Join(dir, CADir, CAFile))
	require.NoError(t, err)
	made, err = EnsureStack(dir, []string{"temporal"}, 10*year, year, now)
	require.NoError(t, err)
	require.Len(t, made, len(StackCerts), "the CA and every service's certificate but the admin's")
	require.NoError(t, os.Remove(filepath.Join(dir, "ui", CertFile)))
	_, err = EnsureStack(dir, []string{"temporal"}, 10*year, year, now)
	require.ErrorContains(t, err, filepath.Join(dir, "ui", CertFile)+" is missing")
	require.ErrorContains(t, err, "the CA's key is not in")
	caAfter, err := os.ReadFile(filepath.Join(dir, CADir, CAFile))
	require.NoError(t, err)
	require.Equal(t, caBefore, caAfter, "the brought CA stays")

	// A CA within 30 days of its end is refused, with what to do.
	_, err = EnsureStack(t.TempDir(), []string{"temporal"}, 40*24*time.Hour, 35*24*time.Hour, now)
	require.NoError(t, err)
	near := t.TempDir()
	_, err = EnsureStack(near, []string{"temporal"}, 40*24*time.Hour, 35*24*time.Hour, now)
	require.NoError(t, err)
	_, err = EnsureStack(near, []string{"temporal"}, 40*24*time.Hour, 35*24*time.Hour, now.Add(11*24*time.Hour))
	require.ErrorContains(t, err, "make a new one (move ca.pem and ca-key.pem away")
}
