package starter

import (
	"errors"
	"fmt"
	"time"

	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/keys"
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
	// Fallback is the provider the run moves to when Provider's records
	// prove it sent nothing ("sendy" for an event on "bird"); empty for
	// none. The recipient, text and sender are checked for it too.
	Fallback string `json:"fallback,omitempty"`
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
	c, err := sms.Check(sms.Event{Key: key, Provider: e.Provider, To: e.To, From: e.From, Text: e.Text, Fallback: e.Fallback}, now)
	var fe *sms.FieldError
	if errors.As(err, &fe) {
		return p, invalid(fe.Field, fe.Err)
	} else if err != nil {
		return p, invalid("event", err)
	}
	p.Key, p.Text, p.Warnings = key, c.Text, c.Warnings
	p.Input = contract.Input{Key: string(key), Provider: string(c.Provider), To: c.To.E164, From: c.From, Text: e.Text, Fallback: string(c.Fallback)}
	return p, nil
}

// EventKey is the key the event names (its parts, its OTP ids, or its
// key), or why it names none.
func (e Event) EventKey() (keys.Key, error) { return e.key() }

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
