package intake

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/keys"
)

var senderName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// ParseSenders reads named senders from their setting
// (SMSORCH_INTAKE_SENDERS, or the file SMSORCH_INTAKE_SENDERS_FILE names):
// entries separated by commas or lines, each NAME:KINDS:SECRET, KINDS
// the event kinds joined by + (order+refund), or * for every kind:
//
//	shop:order+refund:3f9a…
//	auth:otp:77ab…
//
// A name given twice has two secrets, for a rotation without downtime:
// add the new one, move the sender over, remove the old. What is wrong
// is said per entry, naming it by its place and name, never its secret.
func ParseSenders(s string) ([]Sender, error) {
	var out []Sender
	var errs []error
	kinds := map[string]string{}
	owners := map[logging.Secret]string{}
	var entries []string
	for _, line := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }) {
		// A comment is the whole line, every entry on it.
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		entries = append(entries, strings.Split(line, ",")...)
	}
	n := 0
	for _, entry := range entries {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		n++
		parts := strings.SplitN(entry, ":", 3)
		if len(parts) != 3 {
			errs = append(errs, fmt.Errorf("intake sender %d is not NAME:KINDS:SECRET (like shop:order+refund:<openssl rand -hex 32>)", n))
			continue
		}
		name, kindList, secret := parts[0], parts[1], parts[2]
		if !senderName.MatchString(name) {
			errs = append(errs, fmt.Errorf("intake sender %d: the name %q is not lowercase letters, digits and dashes", n, name))
			continue
		}
		snd := Sender{Name: name, Secret: logging.Secret(strings.TrimSpace(secret))}
		if kindList != "*" {
			for _, k := range strings.Split(kindList, "+") {
				if !keys.ValidKind(k) {
					errs = append(errs, fmt.Errorf("intake sender %s: the kind %q is not an event kind (the key's first part, like order or otp); give kinds joined by +, or * for every kind", name, k))
					continue
				}
				snd.Kinds = append(snd.Kinds, k)
			}
		}
		if snd.Secret == "" {
			errs = append(errs, fmt.Errorf("intake sender %s has no secret: make one with `openssl rand -hex 32`", name))
		} else if other, ok := owners[snd.Secret]; ok && other != name {
			errs = append(errs, fmt.Errorf("intake senders %s and %s have the same secret: each could sign as the other; make one with `openssl rand -hex 32` for each", other, name))
		}
		owners[snd.Secret] = name
		// Both secrets of a rotation serve the same kinds.
		if prev, ok := kinds[name]; ok && prev != strings.Join(snd.Kinds, "+") {
			errs = append(errs, fmt.Errorf("intake sender %s is given twice with other kinds: its two secrets (a rotation) serve the same kinds", name))
		}
		kinds[name] = strings.Join(snd.Kinds, "+")
		out = append(out, snd)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}
