package ledger

import (
	"errors"
	"fmt"
	"strings"

	"github.com/acme/smsorch/codec"
)

// Option configures Open.
type Option func(*options)

type options struct {
	keys       *codec.Keyring
	hideSealed bool
	readOnly   bool
}

// WithKeys seals the personal fields of every event (its recipient and
// text) with the payload keys, and keys the request fingerprints (an
// HMAC instead of a bare sha256, from which a six-digit code and a known
// number could be guessed). Rows written before are sealed when the
// ledger opens. Without keys (dev mode without SMSORCH_CODEC_KEYS, or
// --plaintext-payloads) they are stored as given.
func WithKeys(k *codec.Keyring) Option { return func(o *options) { o.keys = k } }

// HideSealed is for a tool that reads the ledger without the keys
// (`smsctl audit` without SMSORCH_CODEC_KEYS): a sealed recipient or
// text reads as Hidden instead of failing. Never for a worker, which
// compares them.
func HideSealed() Option { return func(o *options) { o.hideSealed = true } }

// ForReading is for a tool that only reads (`smsctl audit`): opening
// the ledger leaves rows written in plain or under an older key as they
// are, for the workers to seal, instead of rewriting them (and, on
// SQLite, vacuuming the file) beside the workers.
func ForReading() Option { return func(o *options) { o.readOnly = true } }

// Hidden stands for a sealed value read without the keys.
const Hidden = "(sealed)"

// protector applies the keys; a nil protector stores values as given.
type protector struct {
	keys       *codec.Keyring
	hideSealed bool
	// readOnly leaves the rows sealing at open would rewrite (ForReading).
	readOnly bool
}

// protector is the protector the options describe.
func (o options) protector() *protector {
	return &protector{keys: o.keys, hideSealed: o.hideSealed, readOnly: o.readOnly}
}

// sealsAtOpen reports whether opening the store seals the rows written
// in plain or under an older key: with keys, unless only reading.
func (p *protector) sealsAtOpen() bool { return p.keys != nil && !p.readOnly }

// Columns the sealed values are bound to.
const (
	sealRecipient = "events.recipient"
	sealText      = "events.body_text"
)

// ErrSealed is a ledger whose rows are sealed, opened without the keys.
var ErrSealed = errors.New("ledger: the event's recipient and text are sealed: open the ledger with the payload keys (SMSORCH_CODEC_KEYS or SMSORCH_CODEC_KEY_FILE) that sealed them")

// seal is the event as it is written.
func (p *protector) seal(e Event) (Event, error) {
	if p == nil || p.keys == nil {
		return e, nil
	}
	var err error
	if e.Recipient, err = p.keys.SealString(e.Recipient, sealRecipient); err != nil {
		return e, err
	}
	if e.Text, err = p.keys.SealString(e.Text, sealText); err != nil {
		return e, err
	}
	e.Fingerprint = p.fingerprint(e.Fingerprint)
	return e, nil
}

// fingerprint is a request fingerprint as it is written; one keyed
// already stays (its bare form is not kept, and the ring compares it
// while it holds its key).
func (p *protector) fingerprint(fp string) string {
	if p == nil || p.keys == nil || fp == "" || codec.IsMAC(fp) {
		return fp
	}
	return p.keys.MAC([]byte(fp))
}

// notCurrent is a LIKE pattern of the values not sealed under the
// current key, for the stores' search of rows to seal.
func (p *protector) notCurrent() string { return codec.SealedUnder(p.keys.Current()) + "%" }

// open is the event as it is read: recipient and text in plain, the
// fingerprint as stored.
func (p *protector) open(e Event) (Event, error) {
	for _, f := range []struct {
		v       *string
		context string
	}{{&e.Recipient, sealRecipient}, {&e.Text, sealText}} {
		if !codec.IsSealedString(*f.v) {
			continue
		}
		if p != nil && p.keys == nil && p.hideSealed {
			*f.v = Hidden
			continue
		}
		if p == nil || p.keys == nil {
			return e, fmt.Errorf("%w: event %s", ErrSealed, e.Key)
		}
		plain, err := p.keys.OpenString(*f.v, f.context)
		if err != nil {
			return e, fmt.Errorf("ledger: event %s: %w", e.Key, err)
		}
		*f.v = plain
	}
	return e, nil
}

// sameFingerprint compares a stored fingerprint (keyed or not) with one
// given in plain. A fingerprint keyed under a key the ring no longer
// holds cannot be compared: it passes (the fields themselves were
// compared, and a provider that finds other bytes under the key says so).
func (p *protector) sameFingerprint(stored, given string) bool {
	if !codec.IsMAC(stored) {
		return stored == given
	}
	if p == nil || p.keys == nil {
		return true
	}
	match, ok := p.keys.MACMatches(stored, []byte(given))
	return match || !ok
}

// message is what a purged event keeps of its message, keyed: enough to
// tell another message under the key, nothing to read it from.
func message(e Event) []byte {
	return []byte(strings.Join([]string{"message", e.Provider, e.Recipient, e.Sender, e.Text}, "\x00"))
}

// purgedFingerprint is what the fingerprint column holds after the
// purge: the keyed fingerprint of the message, or nothing without keys.
func (p *protector) purgedFingerprint(e Event) string {
	if p == nil || p.keys == nil {
		return ""
	}
	return p.keys.MAC(message(e))
}

// sameMessage compares a purged event's kept fingerprint with a claim;
// true when it cannot tell.
func (p *protector) sameMessage(stored Event, e Event) bool {
	if stored.Fingerprint == "" || p == nil || p.keys == nil {
		return true
	}
	match, ok := p.keys.MACMatches(stored.Fingerprint, message(e))
	return match || !ok
}

// Purged reports an event whose personal fields were removed after the
// retention (Purge): its recipient and text are empty, its fingerprint
// is the keyed fingerprint of the message, or empty.
func (e Event) Purged() bool {
	return e.Settled() && e.Recipient == "" && e.Text == ""
}

// toReseal opens the rows found not sealed under the current key: plain
// ones as they are, sealed ones under a key the ring still holds. A row
// sealed under a key the ring lacks is left as it is (it opens for no
// one here, and a worker that holds the key will re-seal it).
func (p *protector) toReseal(found []Event) ([]Event, error) {
	var out []Event
	for _, e := range found {
		opened, err := p.open(e)
		if errors.Is(err, codec.ErrUnknownKey) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, opened)
	}
	return out, nil
}

// keptAfterPurge opens a row due for the purge and returns what its
// fingerprint column keeps: the keyed fingerprint of the message. A row
// sealed under a key this ring lacks cannot be fingerprinted here, and
// purged without its fingerprint another message under its key would no
// longer conflict: it is left (left is the reason) for a worker that
// holds the key.
func (p *protector) keptAfterPurge(e Event) (kept string, left, err error) {
	opened, err := p.open(e)
	if errors.Is(err, codec.ErrUnknownKey) || errors.Is(err, ErrSealed) {
		return "", err, nil
	}
	if err != nil {
		return "", nil, err
	}
	return p.purgedFingerprint(opened), nil, nil
}

// leftUnpurged is the error of a purge that left rows it could not
// fingerprint (keptAfterPurge), or nil when it left none.
func leftUnpurged(left []error) error {
	if len(left) == 0 {
		return nil
	}
	return fmt.Errorf("ledger: the purge left %d settled events with their recipient and text, sealed under a key this worker's ring lacks, so that another message under their keys still conflicts; a worker that holds the key purges them (first: %w)", len(left), left[0])
}
