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
	if v == "" {
		return "", fmt.Errorf("%s names %s, which is empty: write the secret into it", name+FileSuffix, file)
	}
	return v, nil
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
