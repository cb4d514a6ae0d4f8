// Package keys derives the SMS key from a business event.
//
// The key is the identity of one intended SMS. It is the Temporal workflow
// id of the event's run and the provider's Idempotency-Key, so it must come
// out the same every time the same event is processed, on any machine, in
// any attempt, and differ for every other event:
//
//	keys.Event("order", "58213", "shipped") // order-58213-shipped
//	keys.OTP("8412", "7")                   // otp-8412-7
//	keys.Resend("order-58213-shipped", 1)   // order-58213-shipped~resend-1
//	keys.Via("order-58213-shipped", "sendy") // order-58213-shipped~via-sendy
//
// Never build a key from the clock or from a UUID made inside the send: each
// attempt would get a new key and the provider would send each one. Never
// use the recipient alone: it blocks the next legitimate message to the same
// person. Parse refuses the second; Warnings flags the first.
package keys

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Key is a validated SMS key: 1 to MaxLen bytes of printable ASCII without
// spaces, safe as a Temporal workflow id and as an HTTP header value.
type Key string

func (k Key) String() string { return string(k) }

const (
	// MaxLen is the longest key, resend keys included.
	MaxLen = 255
	// MaxEventLen is the longest event key. The difference leaves room for
	// the resend suffix, so every resend of a valid event has a valid key.
	MaxEventLen = 240
	// MaxResends is the highest resend number.
	MaxResends = 999999

	sep          = "-"
	resendMarker = "~resend-"
	viaMarker    = "~via-"
	reserved     = '~'
)

// Sentinel errors, matched with errors.Is on any error from this package.
var (
	ErrEmpty     = errors.New("empty")
	ErrTooLong   = errors.New("too long")
	ErrCharacter = errors.New("character not allowed")
	ErrPart      = errors.New("malformed part")
	ErrRecipient = errors.New("identifies a person, not a message")
	ErrResend    = errors.New("malformed resend key")
)

// Error says which key (or part) is wrong, why, and how to fix it.
type Error struct {
	// Input is the key or the part that was refused.
	Input string
	// Part names the refused part ("kind", "id", "stage", "key").
	Part string
	// Kind is one of the sentinel errors above.
	Kind error
	// Problem and Fix are for people.
	Problem, Fix string
}

func (e *Error) Error() string {
	if e.Part == "key" {
		return fmt.Sprintf("sms key %q: %s; %s", e.Input, e.Problem, e.Fix)
	}
	return fmt.Sprintf("sms key %s %q: %s; %s", e.Part, e.Input, e.Problem, e.Fix)
}

// Unwrap lets errors.Is match the sentinel in Kind.
func (e *Error) Unwrap() error { return e.Kind }

var (
	// kind and stage never contain the separator, so kind-id-stage splits one
	// way only and two different events can never produce the same key.
	kindRE  = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	stageRE = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
	// resendRE matches the suffix a resend adds: no leading zeros, so one
	// resend number has one spelling.
	resendRE = regexp.MustCompile(`^(.+)~resend-([1-9][0-9]{0,5})$`)
	// viaRE matches the suffix of the key an event's SMS takes at another
	// provider than its first: a failover, or a person's decision.
	viaRE = regexp.MustCompile(`^(.+)~via-([a-z]{1,10})$`)
	// phoneOnlyRE is a key that is a phone number, optionally behind a word
	// that names a person or number: it identifies the recipient, not a message.
	phoneOnlyRE = regexp.MustCompile(`(?i)^(?:(?:phone|tel|mobile|msisdn|sms|to|recipient|number|customer|contact|user)[-_:.]?)?\+?[0-9]{7,15}$`)
)

// ValidKind says whether kind is an event kind as Event takes it.
func ValidKind(kind string) bool { return kindRE.MatchString(kind) }

// KindOf is the kind of an event key: its first part (order in
// order-58213-shipped, otp in an OTP's key).
func KindOf(k Key) string {
	kind, _, _ := strings.Cut(string(k), sep)
	return kind
}

// Event derives the key of a business event: kind-id-stage, for example
// Event("order", "58213", "shipped") is "order-58213-shipped".
//
//   - kind names the entity, in lowercase: letters, digits, '_' ("order", "user_invite").
//   - id is the entity's id as stored in your database: printable ASCII
//     without spaces or '~' ("58213", a UUID made when the entity was created).
//   - stage names the event in the entity's life: letters, digits, '_'
//     ("shipped", "delivered", or an OTP attempt id).
func Event(kind, id, stage string) (Key, error) {
	if !kindRE.MatchString(kind) {
		return "", partError(kind, "kind",
			"must start with a lowercase letter and hold only lowercase letters, digits and '_'",
			`name the entity in lowercase, for example "order" or "user_invite"`)
	}
	if err := checkID(id); err != nil {
		return "", err
	}
	if !stageRE.MatchString(stage) {
		return "", partError(stage, "stage",
			"must hold only letters, digits and '_', at least one",
			`name the event, for example "shipped"; for an id with '-' (a UUID) remove the dashes`)
	}
	k := kind + sep + id + sep + stage
	if len(k) > MaxEventLen {
		return "", &Error{Input: k, Part: "key", Kind: ErrTooLong,
			Problem: fmt.Sprintf("is %d bytes, more than the %d an event key may have", len(k), MaxEventLen),
			Fix:     "use a shorter id: the database id of the entity, not its content"}
	}
	return Parse(k)
}

// OTP derives the key of one one-time-code SMS from the user id and the OTP
// attempt id. A "send the code again" press must create a new attempt id:
// it is a new message with a new code, so it needs a new key. The attempt id
// follows the rules of Event's stage.
func OTP(userID, attemptID string) (Key, error) {
	return Event("otp", userID, attemptID)
}

// Resend derives the key of the n-th resend (n from 1) of an event: a new
// SMS decided by a person, so the provider must treat it as a new request.
// It is distinct from the event key and from every other resend's key.
// event may be a Via key: the resends at the provider the event moved to.
func Resend(event Key, n int) (Key, error) {
	if _, _, ok := SplitResend(event); ok {
		return "", &Error{Input: string(event), Part: "key", Kind: ErrResend,
			Problem: "is already a resend key", Fix: "derive every resend from the event key"}
	}
	if n < 1 || n > MaxResends {
		return "", &Error{Input: strconv.Itoa(n), Part: "resend number", Kind: ErrResend,
			Problem: fmt.Sprintf("is outside 1 to %d", MaxResends), Fix: "count resends from 1"}
	}
	return Parse(string(event) + resendMarker + strconv.Itoa(n))
}

// Via derives the key of an event's SMS at provider p, another than the
// provider it was first sent to: order-58213-shipped~via-sendy. It is
// refused when the longest resend key at p (Via…~resend-999999) would be
// longer than MaxLen, so every resend after the move has a valid key.
func Via(event Key, p string) (Key, error) {
	if Base(event) != event {
		return "", &Error{Input: string(event), Part: "key", Kind: ErrResend,
			Problem: "is a resend or fallback key", Fix: "derive the fallback key from the event key"}
	}
	k, err := Parse(string(event) + viaMarker + p)
	if err != nil {
		return "", err
	}
	if longest := string(k) + resendMarker + strconv.Itoa(MaxResends); len(longest) > MaxLen {
		return "", &Error{Input: string(event), Part: "key", Kind: ErrTooLong,
			Problem: fmt.Sprintf("leaves no room for the key at %s and its resends (%d bytes at most, this one would take %d)", p, MaxLen, len(longest)),
			Fix:     "use a shorter event key for events that may move to another provider"}
	}
	return k, nil
}

// SplitResend returns the key and resend number of a resend key (the key
// being an event key or a Via key); ok is false for any other key.
func SplitResend(k Key) (event Key, n int, ok bool) {
	m := resendRE.FindStringSubmatch(string(k))
	if m == nil {
		return k, 0, false
	}
	n, _ = strconv.Atoi(m[2]) // at most six digits
	return Key(m[1]), n, true
}

// SplitVia returns the event key and the provider of a Via key, or of a
// resend of one; ok is false for keys at the event's first provider.
func SplitVia(k Key) (event Key, p string, ok bool) {
	k, _, _ = SplitResend(k)
	m := viaRE.FindStringSubmatch(string(k))
	if m == nil {
		return k, "", false
	}
	return Key(m[1]), m[2], true
}

// Base is the event key of any key of its SMS: the key itself, a resend
// key, a Via key or a resend of one.
func Base(k Key) Key {
	base, _, _ := SplitVia(k)
	return base
}

// Parse validates a key given as a whole string, such as one that arrives
// over HTTP, and returns it as a Key.
func Parse(s string) (Key, error) {
	if s == "" {
		return "", &Error{Input: s, Part: "key", Kind: ErrEmpty, Problem: "is empty",
			Fix: `derive it from the event, for example keys.Event("order", "58213", "shipped")`}
	}
	if len(s) > MaxLen {
		return "", &Error{Input: s[:40] + "…", Part: "key", Kind: ErrTooLong,
			Problem: fmt.Sprintf("is %d bytes, more than %d", len(s), MaxLen),
			Fix:     "build it from the event's kind, id and stage, not from the message content"}
	}
	if err := checkChars(s, "key"); err != nil {
		return "", err
	}
	base := s
	if strings.ContainsRune(s, reserved) {
		base = string(Base(Key(s)))
		if strings.ContainsRune(base, reserved) {
			return "", &Error{Input: s, Part: "key", Kind: ErrResend,
				Problem: "uses '~', which is reserved for resend and fallback keys (event~resend-N, event~via-provider)",
				Fix:     "remove the '~' from the event key, or derive resend keys with keys.Resend"}
		}
	}
	if len(base) > MaxEventLen {
		return "", &Error{Input: s, Part: "key", Kind: ErrTooLong,
			Problem: fmt.Sprintf("has an event part of %d bytes, more than %d", len(base), MaxEventLen),
			Fix:     "use a shorter event key"}
	}
	if phoneOnlyRE.MatchString(base) {
		return "", recipientError(s)
	}
	return Key(s), nil
}

// ParseEvent validates the key of a business event: Parse, and not a
// resend key. A resend key (event~resend-N) belongs to a resend that the
// event's own run derives; started as an event of its own it would share
// that resend's Idempotency-Key with the first event's run.
func ParseEvent(s string) (Key, error) {
	k, err := Parse(s)
	if err != nil {
		return "", err
	}
	if base, n, ok := SplitResend(k); ok {
		return "", &Error{Input: s, Part: "key", Kind: ErrResend,
			Problem: fmt.Sprintf("is the key of resend %d of the event %s, not an event key", n, base),
			Fix:     fmt.Sprintf("start the event with its own key (%s); a resend is decided on that event's run", Base(base))}
	}
	if base, p, ok := SplitVia(k); ok {
		return "", &Error{Input: s, Part: "key", Kind: ErrResend,
			Problem: fmt.Sprintf("is the key of the event %s at %s, not an event key", base, p),
			Fix:     fmt.Sprintf("start the event with its own key (%s) and a fallback provider; the run moves to it", base)}
	}
	return k, nil
}

// CheckRecipient refuses a key that is nothing but the recipient's number
// (in international or national form, with or without a label such as
// "phone-"). Such a key names the person, so the provider would refuse the
// next, different message to them as a key conflict.
func CheckRecipient(k Key, recipientE164 string) error {
	digits := strings.TrimPrefix(recipientE164, "+")
	if len(digits) < 7 {
		return nil
	}
	base := Base(k)
	rest := digitRunRE.ReplaceAllStringFunc(string(base), func(run string) string {
		trimmed := strings.TrimLeft(run, "0")
		if len(run) >= 7 && len(trimmed) >= 6 && strings.HasSuffix(digits, trimmed) {
			return ""
		}
		return run
	})
	if rest == string(base) {
		return nil
	}
	if strings.Trim(labelRE.ReplaceAllString(rest, ""), "-_:.+") == "" {
		return recipientError(string(k))
	}
	return nil
}

var (
	digitRunRE = regexp.MustCompile(`[0-9]+`)
	labelRE    = regexp.MustCompile(`(?i)phone|tel|mobile|msisdn|sms|to|recipient|number|customer|contact|user`)
)

func recipientError(s string) error {
	return &Error{Input: s, Part: "key", Kind: ErrRecipient,
		Problem: "is a phone number: it names the person, not the message, so the next different message to them would be refused as a key conflict",
		Fix:     `derive it from the event instead, for example keys.Event("order", "58213", "shipped")`}
}

func checkID(id string) error {
	if id == "" {
		return partError(id, "id", "is empty", "pass the entity's database id")
	}
	if err := checkChars(id, "id"); err != nil {
		return err
	}
	if strings.ContainsRune(id, reserved) {
		return partError(id, "id", "contains '~', which is reserved for resend keys", "remove the '~'")
	}
	return nil
}

func checkChars(s, part string) error {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' {
			return &Error{Input: s, Part: part, Kind: ErrCharacter,
				Problem: fmt.Sprintf("has %s at byte %d; keys are printable ASCII without spaces", describe(c), i),
				Fix:     "use the entity's id as stored (digits, letters, '-', '_'), not a name or free text"}
		}
	}
	return nil
}

func describe(c byte) string {
	switch {
	case c == ' ':
		return "a space"
	case c < ' ' || c == 0x7f:
		return fmt.Sprintf("control character 0x%02x", c)
	default:
		return fmt.Sprintf("non-ASCII byte 0x%02x", c)
	}
}

func partError(input, part, problem, fix string) error {
	kind := ErrPart
	if input == "" {
		kind = ErrEmpty
	}
	return &Error{Input: input, Part: part, Kind: kind, Problem: problem, Fix: fix}
}
