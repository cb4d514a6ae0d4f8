// Package stacksecrets makes the secret files docker-compose.yml mounts
// into its services (compose `secrets:`, each at /run/secrets/NAME): one
// file per secret in a directory of the host, so that no secret sits in
// a container's environment, where `docker inspect` and every process
// of the container read it.
package stacksecrets

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/acme/smsorch/codec"
)

// Secret is one file of the directory.
type Secret struct {
	// Name is the file's name and the compose secret's.
	Name string
	// What says what it is, for the command's output.
	What string
	// IfEmpty says what an empty file means, for a secret that is the
	// user's to give.
	IfEmpty string
	// make makes a fresh value; nil for a secret that is the user's to
	// give (a provider's credential), left as an empty file, which the
	// services read as not given.
	make func() (string, error)
	// sim makes a value when the stack runs against the simulator, which
	// accepts whatever credentials it is given.
	sim bool
}

// Made says whether the command makes the secret's value.
func (s Secret) Made() bool { return s.make != nil }

func randomHex(n int) func() (string, error) {
	return func() (string, error) {
		b := make([]byte, n)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		return hex.EncodeToString(b), nil
	}
}

// All are the stack's secrets, in the order docs/operations.md lists them.
var All = []Secret{
	{Name: "postgres-password", What: "the PostgreSQL superuser's password: postgres and postgres-roles only", make: randomHex(24)},
	{Name: "ledger-db-password", What: "the workers' PostgreSQL role's password: the ledger", make: randomHex(24)},
	{Name: "temporal-db-password", What: "the Temporal servers' PostgreSQL role's password", make: randomHex(24)},
	{Name: "codec-keys", What: "the payload keys that seal recipients and texts, ID:KEY a line, the first seals", make: func() (string, error) {
		return codec.NewKey(time.Now().UTC().Format("2006-01"))
	}},
	{Name: "codec-token", What: "the codec server's token, which the web UI's users give it", make: randomHex(32)},
	{Name: "intake-secret", What: "the HTTP intake's signing secret", make: randomHex(32)},
	{Name: "intake-secret-previous", What: "the intake's previous secret during a rotation", IfEmpty: "no rotation under way"},
	{Name: "intake-senders", What: "named intake senders, NAME:KINDS:SECRET,…", IfEmpty: "none"},
	{Name: "bird-access-key", What: "Bird's access key", IfEmpty: "Bird left out", sim: true},
	{Name: "sendy-token", What: "Sendy's API token", IfEmpty: "Sendy left out", sim: true},
	{Name: "ui-oidc-client-secret", What: "the web UI's client secret at your OpenID Connect provider", IfEmpty: "no login"},
}

// Result is what Make did with one secret.
type Result struct {
	Secret
	// Wrote is true when Make wrote the file; false when it was there.
	Wrote bool
	// Empty is true when the file is empty: the secret not given.
	Empty bool
}

// FileMode is the mode of each file: readable by the user each container
// runs as (compose bind-mounts the file as it is on the host, and the
// containers run as users of their own), while the directory, 0700,
// keeps the host's other users out.
const FileMode = 0o644

// Make writes into dir every secret that is missing there: a fresh value
// for those it makes, an empty file for those that are the user's to
// give (with forSimulator, a fresh value for the providers' credentials
// too, which the simulator accepts). A file that is there is kept as it
// is, so Make is safe to run again; a file of the user's left empty is
// filled only with forSimulator.
func Make(dir string, forSimulator bool) ([]Result, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("make the secrets directory: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("keep the secrets directory %s to its owner: %w", dir, err)
	}
	var out []Result
	for _, s := range All {
		path := filepath.Join(dir, s.Name)
		b, err := os.ReadFile(path)
		switch {
		case err == nil && (len(b) > 0 || !(forSimulator && s.sim)):
			out = append(out, Result{Secret: s, Empty: len(b) == 0})
			continue
		case err != nil && !os.IsNotExist(err):
			return out, fmt.Errorf("read %s: %w", path, err)
		}
		v, err := "", error(nil)
		switch {
		case s.make != nil:
			v, err = s.make()
		case forSimulator && s.sim:
			v, err = randomHex(16)()
		}
		if err != nil {
			return out, fmt.Errorf("make %s: %w", s.Name, err)
		}
		if v != "" {
			v += "\n"
		}
		if err := writeFile(path, v); err != nil {
			return out, err
		}
		out = append(out, Result{Secret: s, Wrote: true, Empty: v == ""})
	}
	return out, nil
}

// writeFile writes path whole or not at all.
func writeFile(path, v string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	_, err = tmp.WriteString(v)
	if err == nil {
		err = tmp.Chmod(FileMode)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
