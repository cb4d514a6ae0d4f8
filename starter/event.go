package starter

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/keys"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/sms"
)

// Event is a business event that must produce one SMS. Name the event by
// its parts (Kind, ID, Stage), or as an OTP (OTPUser, OTPAttempt), or by a
// Key you derived yourself; exactly one of the three.
type Event struct {
	Kind  string `json:"kind,omitempty"`
	ID    string `json:"id,omitempty"`
	Stage string `json:"stage,omitempty"`

	OTPUser    string `json:"otpUser,omitempty"`
	OTPAttempt string `json:"otpAttempt,omitempty"`

	Key string `json:"key,omitempty"`

	// To is the recipient, in international form ("+31612345678").
	To string `json:"to"`
	// Text is the message.
	Text string `json:"text"`
	// Provider is "bird" or "sendy".
	Provider string `json:"provider"`
	// From is the sender name (Sendy); empty for Bird or the default.
	From string `json:"from,omitempty"`
}

// Plan is a validated event, ready to start.
type Plan struct {
	Key   keys.Key       `json:"key"`
	Input contract.Input `json:"input"`
	// Text is how the network will carry the text.
	Text sms.Text `json:"text"`
	// Warnings are accepted but worth a look (a timestamp in the key, a
	// number outside the known ranges).
	Warnings []string `json:"warnings,omitempty"`
}

// ErrInvalid is matched (errors.Is) by every validation error.
var ErrInvalid = errors.New("invalid event")

// InvalidError says which field is wrong and how to fix it.
type InvalidError struct {
	Field string
	Err   error
}

func (e *InvalidError) Error() string { return fmt.Sprintf("invalid %s: %v", e.Field, e.Err) }

// Unwrap exposes the cause (a keys.Error, an sms.Error).
func (e *InvalidError) Unwrap() []error { return []error{ErrInvalid, e.Err} }

func invalid(field string, err error) error { return &InvalidError{Field: field, Err: err} }

// Validate checks everything about an event before anything starts: the
// key rules, the recipient (E.164, through libphonenumber), the text (not
// empty, at most sms.MaxSegments segments), the provider. now is for the
// timestamp warning.
func Validate(e Event, now time.Time) (Plan, error) {
	var p Plan
	key, err := e.key()
	if err != nil {
		return p, invalid("key", err)
	}
	to, err := sms.ParseRecipient(e.To)
	if err != nil {
		return p, invalid("to", err)
	}
	if err := keys.CheckRecipient(key, to.E164); err != nil {
		return p, invalid("key", err)
	}
	text, err := sms.InspectText(e.Text)
	if err != nil {
		return p, invalid("text", err)
	}
	prov, err := provider.ParseName(e.Provider)
	if err != nil {
		return p, invalid("provider", err)
	}
	if prov == provider.Bird && e.From != "" {
		return p, invalid("from", fmt.Errorf("Bird sends from the SMS channel's own sender; leave the sender empty (it was %q)", e.From))
	}
	p.Key, p.Text = key, text
	p.Input = contract.Input{Key: string(key), Provider: string(prov), To: to.E164, From: strings.TrimSpace(e.From), Text: e.Text}
	if to.Warning != "" {
		p.Warnings = append(p.Warnings, to.Warning)
	}
	for _, w := range keys.Warnings(key, now) {
		p.Warnings = append(p.Warnings, w.Message)
	}
	return p, nil
}

func (e Event) key() (keys.Key, error) {
	byParts := e.Kind != "" || e.ID != "" || e.Stage != ""
	byOTP := e.OTPUser != "" || e.OTPAttempt != ""
	n := 0
	for _, b := range []bool{byParts, byOTP, e.Key != ""} {
		if b {
			n++
		}
	}
	switch {
	case n == 0:
		return "", errors.New("the event has no key: give kind, id and stage (order, 58213, shipped), or the OTP user and attempt ids, or a key")
	case n > 1:
		return "", errors.New("the event is named more than one way: give kind/id/stage, or the OTP ids, or a key, not several")
	case byParts:
		return keys.Event(e.Kind, e.ID, e.Stage)
	case byOTP:
		return keys.OTP(e.OTPUser, e.OTPAttempt)
	default:
		return keys.ParseEvent(e.Key)
	}
}
