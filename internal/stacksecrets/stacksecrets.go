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
	"strings"
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
	// From names the variable of the old .env the value was moved from.
	From string
}

// FileMode is the mode of each file: readable by the user each container
// runs as (compose bind-mounts the file as it is on the host, and the
// containers run as users of their own), while the directory, 0700,
// keeps the host's other users out.
const FileMode = 0o644

// Legacy maps each secret to the variable of .env that held it before
// the secrets became files (1.0.0): Make moves a value it finds there.
var Legacy = map[string]string{
	"postgres-password":      "POSTGRES_PASSWORD",
	"ledger-db-password":     "SMSORCH_DB_PASSWORD",
	"temporal-db-password":   "TEMPORAL_DB_PASSWORD",
	"codec-keys":             "SMSORCH_CODEC_KEYS",
	"codec-token":            "SMSORCH_CODEC_TOKEN",
	"intake-secret":          "SMSORCH_INTAKE_SECRET",
	"intake-secret-previous": "SMSORCH_INTAKE_SECRET_PREVIOUS",
	"intake-senders":         "SMSORCH_INTAKE_SENDERS",
	"bird-access-key":        "BIRD_ACCESS_KEY",
	"sendy-token":            "SENDY_TOKEN",
	"ui-oidc-client-secret":  "SMSORCH_UI_OIDC_CLIENT_SECRET",
}

// Report is what Make did.
type Report struct {
	Results []Result
	// Warnings are what the user should fix by hand.
	Warnings []string
}

// Make writes into dir every secret that is missing or empty there: the
// value an old .env held (env, the variables of Legacy), else a fresh
// value for those it makes, else an empty file for those that are the
// user's to give (with forSimulator, a fresh value for the providers'
// credentials too, which the simulator accepts). A file that holds a
// value is kept (made readable to the containers), so Make is safe to
// run again; one whose value differs from .env's is an error, since
// either may be the one in use.
func Make(dir string, forSimulator bool, env map[string]string) (Report, error) {
	var rep Report
	if st, err := os.Stat(dir); err == nil && st.IsDir() && st.Mode().Perm()&0o077 != 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s is open to other users of this host (mode %04o): chmod 700 %s", dir, st.Mode().Perm(), dir))
	} else if os.IsNotExist(err) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return rep, fmt.Errorf("make the secrets directory: %w", err)
		}
	} else if err != nil {
		return rep, fmt.Errorf("the secrets directory: %w", err)
	}
	for _, s := range All {
		path := filepath.Join(dir, s.Name)
		b, err := os.ReadFile(path)
		if err != nil && !os.IsNotExist(err) {
			return rep, fmt.Errorf("read %s: %w", path, err)
		}
		have := strings.TrimSpace(string(b))
		old, from := legacyValue(s.Name, env)
		switch {
		case have != "" && old != "" && have != old:
			return rep, fmt.Errorf("%s and %s in .env hold different values: keep the one in use (for the codec keys, every key that sealed what is still kept), remove the other, and run this again", path, from)
		case have != "" || (err == nil && !s.Made() && old == "" && !(forSimulator && s.sim)):
			if err := os.Chmod(path, FileMode); err != nil {
				rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s: make it readable to the containers (chmod 644): %v", path, err))
			}
			r := Result{Secret: s, Empty: have == ""}
			if have != "" && old != "" {
				r.From = from
			}
			rep.Results = append(rep.Results, r)
			continue
		}
		v, err := old, error(nil)
		switch {
		case v != "":
		case s.make != nil:
			v, err = s.make()
		case forSimulator && s.sim:
			v, err = randomHex(16)()
		}
		if err != nil {
			return rep, fmt.Errorf("make %s: %w", s.Name, err)
		}
		if v != "" {
			v += "\n"
		}
		if err := writeFile(path, v); err != nil {
			return rep, err
		}
		r := Result{Secret: s, Wrote: true, Empty: v == ""}
		if old != "" {
			r.From = from
		}
		rep.Results = append(rep.Results, r)
	}
	return rep, nil
}

// legacyValue is the secret's value in an old .env, as its file holds it
// (the codec keys one a line), and the variable it was in.
func legacyValue(name string, env map[string]string) (string, string) {
	from := Legacy[name]
	v := strings.TrimSpace(env[from])
	if name == "codec-keys" && v != "" {
		var lines []string
		for _, k := range strings.Split(v, ",") {
			if k = strings.TrimSpace(k); k != "" {
				lines = append(lines, k)
			}
		}
		v = strings.Join(lines, "\n")
	}
	return v, from
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

// ReadEnvFile reads an env file as docker compose does (.env): KEY=VALUE
// lines, comments and blank lines skipped, a value's surrounding quotes
// taken off. A file that is not there reads as nil.
func ReadEnvFile(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s:%d is not KEY=VALUE (the line is not quoted here: it may hold a secret)", path, n+1)
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		env[strings.TrimSpace(k)] = v
	}
	return env, nil
}
