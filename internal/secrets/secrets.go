// Package secrets reads the process's secrets from its environment and
// refuses the ones that protect nothing.
//
// Each secret NAME comes from the variable NAME, or from the file named
// by NAME_FILE (the Docker and Kubernetes secrets convention: the file
// is mounted, the variable only names it). Never from a flag: flags show
// in the process list.
package secrets

import (
	"crypto/subtle"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// FileSuffix makes the name of the variable that names a secret's file.
const FileSuffix = "_FILE"

// Get reads the secret name from getenv: the variable itself, or the
// contents of the file its _FILE variable names, without the trailing
// line break. Both set, an unreadable file or an empty one is an error
// that says which.
func Get(getenv func(string) string, name string) (string, error) {
	return get(getenv, name, false)
}

// Optional is Get for a secret a deployment may leave out (a provider's
// credential, a previous secret kept for a rotation): an empty file is
// the secret not given, so that a compose file can mount one for every
// deployment and leave it empty where it does not apply.
func Optional(getenv func(string) string, name string) (string, error) {
	return get(getenv, name, true)
}

func get(getenv func(string) string, name string, emptyFileIsUnset bool) (string, error) {
	v, file := getenv(name), getenv(name+FileSuffix)
	switch {
	case v != "" && file != "":
		return "", fmt.Errorf("both %s and %s are set: give the secret one way", name, name+FileSuffix)
	case file == "":
		return v, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: read the secret's file: %w", name+FileSuffix, err)
	}
	v = strings.TrimRight(string(b), "\r\n")
	if v == "" && !emptyFileIsUnset {
		return "", fmt.Errorf("%s names %s, which is empty: write the secret into it", name+FileSuffix, file)
	}
	return v, nil
}

// PasswordSuffix makes the name of the variable that holds the password
// of a database address: NAME_PASSWORD (or NAME_PASSWORD_FILE) for NAME.
const PasswordSuffix = "_PASSWORD"

// DSN reads the database address name (a postgres:// URL, or a SQLite
// path) and, when NAME_PASSWORD or NAME_PASSWORD_FILE is set, puts that
// password into it: the address can then sit in a deployment file in
// the open, its password in a secret file of its own. Each may be in a
// file (Get).
func DSN(getenv func(string) string, name string) (string, error) {
	dsn, err := Get(getenv, name)
	if err != nil {
		return "", err
	}
	pw, err := Get(getenv, name+PasswordSuffix)
	if err != nil || pw == "" {
		return dsn, err
	}
	return WithPassword(dsn, pw, name)
}

// WithPassword puts pw into the postgres:// address dsn, which must not
// hold one already; name is the address's variable, for the error.
func WithPassword(dsn, pw, name string) (string, error) {
	pwVar := name + PasswordSuffix
	if dsn == "" {
		return "", fmt.Errorf("%s is set without %s: give the database's address (postgres://USER@HOST:5432/DB) in %s", pwVar, name, name)
	}
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		return "", fmt.Errorf("%s is set, but %s is not a postgres://USER@HOST/DB address to put the password into: leave %s out", pwVar, name, pwVar)
	}
	if u.User == nil || u.User.Username() == "" {
		return "", fmt.Errorf("%s is set, but the address in %s names no user: write it as postgres://USER@HOST/DB", pwVar, name)
	}
	_, inUser := u.User.Password()
	q := u.Query()
	if inUser || q.Has("password") {
		q.Del("password")
		bare := url.URL{Scheme: u.Scheme, User: url.User(u.User.Username()), Host: u.Host, Path: u.Path, RawQuery: q.Encode()}
		return "", fmt.Errorf("both %s and the address in %s hold a password: give it one way (the address without it is %s)", pwVar, name, bare.String())
	}
	u.User = url.UserPassword(u.User.Username(), pw)
	return u.String(), nil
}

// Examples are values this project has shipped in an example file, a
// README or a test, or that its simulator takes by default: public, so
// they protect nothing.
var Examples = []string{
	"change-me", "change-me-too", "changeme", "secret", "password",
	"sim-bird-access-key", "sim-sendy-token", "intake-secret", "codec-token",
}

// MinLength is the shortest secret that is ours to choose (the intake's
// HMAC secret, the codec server's token): 32 bytes, what
// `openssl rand -hex 16` prints; `openssl rand -hex 32` is better.
const MinLength = 32

// CheckExample refuses a value that is one of Examples (ignoring case
// and surrounding space), saying how to make a real one.
func CheckExample(name, value, howToMake string) error {
	v := strings.ToLower(strings.TrimSpace(value))
	for _, e := range Examples {
		if subtle.ConstantTimeCompare([]byte(v), []byte(e)) == 1 {
			return fmt.Errorf("%s is a published example value, which anyone can read: %s", name, howToMake)
		}
	}
	if strings.HasPrefix(v, "example") || strings.HasPrefix(v, "change-me") || v == "..." {
		return fmt.Errorf("%s is a placeholder from an example: %s", name, howToMake)
	}
	return nil
}

// CheckChosen refuses a secret of ours that is an example or shorter
// than MinLength.
func CheckChosen(name, value, howToMake string) error {
	if err := CheckExample(name, value, howToMake); err != nil {
		return err
	}
	if len(value) < MinLength {
		return fmt.Errorf("%s is %d bytes, shorter than %d, so it can be guessed: %s", name, len(value), MinLength, howToMake)
	}
	return nil
}
