package ledger

import (
	"errors"
	"fmt"

	"github.com/acme/smsorch/codec"
)

// Option configures Open.
type Option func(*options)

type options struct {
	keys       *codec.Keyring
	hideSealed bool
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

// Hidden stands for a sealed value read without the keys.
const Hidden = "(sealed)"

// protector applies the keys; a nil protector stores values as given.
type protector struct {
	keys       *codec.Keyring
	hideSealed bool
}

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

// fingerprint is a request fingerprint as it is written.
func (p *protector) fingerprint(fp string) string {
	if p == nil || p.keys == nil || fp == "" {
		return fp
	}
	return p.keys.MAC([]byte(fp))
}

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
// given in plain.
func (p *protector) sameFingerprint(stored, given string) bool {
	if p != nil && p.keys != nil {
		if match, ok := p.keys.MACMatches(stored, []byte(given)); ok {
			return match
		}
	}
	return stored == given
}

// Purged reports an event whose personal fields were removed after the
// retention (Purge): its recipient, text and fingerprint are empty.
func (e Event) Purged() bool {
	return e.Settled() && e.Recipient == "" && e.Text == "" && e.Fingerprint == ""
}
