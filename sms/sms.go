// Package sms validates what goes into one SMS before anything is sent: the
// recipient (E.164, checked against libphonenumber's metadata) and the text
// (not empty, its encoding and its number of segments).
package sms

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"

	"github.com/nyaruka/phonenumbers"
)

// ErrInvalid is matched by errors.Is on every validation error.
var ErrInvalid = errors.New("invalid SMS")

// Error names the field, the problem and the fix.
type Error struct {
	Field, Problem, Fix string
}

func (e *Error) Error() string { return fmt.Sprintf("%s %s; %s", e.Field, e.Problem, e.Fix) }

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *Error) Unwrap() error { return ErrInvalid }

// Recipient is a validated phone number.
type Recipient struct {
	// E164 is the number in E.164 form: "+31612345678".
	E164 string `json:"e164"`
	// Warning is set when the number has a possible length for its country
	// but lies outside the ranges libphonenumber knows to be in use. It is
	// accepted (the metadata lags behind new allocations, and refusing a
	// real customer loses a message) and the warning is shown to the caller.
	Warning string `json:"warning,omitempty"`
}

// ParseRecipient validates a phone number. It accepts the usual ways of
// writing an international number ("+31 6 1234 5678", "+31-612-345-678")
// and refuses numbers without a country code, with an unknown country
// code, or that cannot be a mobile number of its country. A number of the
// right length outside the known ranges is accepted with a Warning.
func ParseRecipient(s string) (Recipient, error) {
	raw := strings.TrimSpace(s)
	if raw == "" {
		return Recipient{}, &Error{"recipient", "is empty", "give the phone number in international form, for example +31612345678"}
	}
	if !strings.HasPrefix(raw, "+") {
		if strings.HasPrefix(raw, "00") {
			return Recipient{}, &Error{"recipient", fmt.Sprintf("%q starts with 00", s), "write the international prefix as '+', for example +" + strings.TrimPrefix(raw, "00")}
		}
		return Recipient{}, &Error{"recipient", fmt.Sprintf("%q has no country code", s), "write it in international form with '+' and the country code, for example +972501234567 for 050-123-4567 in Israel"}
	}
	if i := strings.IndexFunc(raw, func(r rune) bool { return !strings.ContainsRune("+0123456789 -().", r) }); i >= 0 {
		return Recipient{}, &Error{"recipient", fmt.Sprintf("%q is not a phone number: it contains %q", s, []rune(raw[i:])[0]),
			"write only digits after the '+' (spaces, dashes and parentheses are fine), for example +31612345678"}
	}
	num, err := phonenumbers.Parse(raw, "")
	if err != nil {
		return Recipient{}, &Error{"recipient", fmt.Sprintf("%q is not a phone number (%v)", s, err), "give it in E.164 form, for example +31612345678"}
	}
	r := Recipient{E164: phonenumbers.Format(num, phonenumbers.E164)}
	if phonenumbers.IsValidNumber(num) {
		return r, nil
	}
	if !phonenumbers.IsPossibleNumber(num) || !mobileLength(num) {
		return Recipient{}, &Error{"recipient", fmt.Sprintf("%q is not a mobile number of country code +%d (wrong length or unknown range)", s, num.GetCountryCode()),
			"check the digits and the country code"}
	}
	// Masked: the warning travels into run timelines, logs and answers.
	r.Warning = fmt.Sprintf("%s is outside the number ranges known to be in use for +%d; it is accepted, but check the digits", MaskPhone(r.E164), num.GetCountryCode())
	return r, nil
}

// mobileLength reports whether the number has as many digits as the
// mobile numbers of its country (libphonenumber's example mobile number).
func mobileLength(num *phonenumbers.PhoneNumber) bool {
	region := phonenumbers.GetRegionCodeForCountryCode(int(num.GetCountryCode()))
	example := phonenumbers.GetExampleNumberForType(region, phonenumbers.MOBILE)
	return example != nil && len(phonenumbers.GetNationalSignificantNumber(example)) == len(phonenumbers.GetNationalSignificantNumber(num))
}

// Encoding is how a text is carried over the SMS network.
type Encoding string

// The two SMS encodings.
const (
	GSM7 Encoding = "GSM-7"
	UCS2 Encoding = "UCS-2"
)

// MaxSegments bounds one message; a longer text is refused.
const MaxSegments = 10

// Text describes a text as the network will carry it.
type Text struct {
	Encoding Encoding `json:"encoding"`
	// Units are GSM-7 septets (extension characters count two) or UTF-16
	// code units (characters outside the BMP, such as emoji, count two).
	Units int `json:"units"`
	// Segments is 1 up to 160 septets / 70 units. A longer text is sent
	// in parts of at most 153 septets / 67 units, because each part
	// carries a concatenation header, and an escape pair or a surrogate
	// pair is never split between two parts: a character that does not
	// fit whole in a part starts the next one, as handsets and SMSCs do.
	Segments int `json:"segments"`
}

func (t Text) String() string {
	return fmt.Sprintf("%s, %d %s, %d segment(s)", t.Encoding, t.Units, map[Encoding]string{GSM7: "septets", UCS2: "UTF-16 units"}[t.Encoding], t.Segments)
}

// InspectText checks the text and reports its encoding and segment count.
func InspectText(s string) (Text, error) {
	if strings.TrimSpace(s) == "" {
		return Text{}, &Error{"text", "is empty", "write the message to send"}
	}
	t := Text{Encoding: GSM7}
	// sizes holds each character's units: 1, or 2 for an escape pair
	// (GSM-7) or a surrogate pair (UCS-2).
	sizes := make([]int, 0, len(s))
	for _, r := range s {
		switch {
		case strings.ContainsRune(gsmBasic, r):
			sizes = append(sizes, 1)
		case strings.ContainsRune(gsmExtension, r):
			sizes = append(sizes, 2)
		default:
			t.Encoding = UCS2
		}
	}
	single, part := 160, 153
	if t.Encoding == UCS2 {
		sizes = sizes[:0]
		for _, r := range s {
			sizes = append(sizes, utf16.RuneLen(r))
		}
		single, part = 70, 67
	}
	for _, n := range sizes {
		t.Units += n
	}
	t.Segments = 1
	if t.Units > single {
		t.Segments = parts(sizes, part)
	}
	if t.Segments > MaxSegments {
		return t, &Error{"text", fmt.Sprintf("needs %d segments (%s), more than the %d allowed", t.Segments, t, MaxSegments),
			fmt.Sprintf("shorten it to at most %d %s", MaxSegments*part, map[Encoding]string{GSM7: "GSM-7 characters (€ [ ] { } ~ \\ ^ | count two)", UCS2: "characters (emoji count two)"}[t.Encoding])}
	}
	return t, nil
}

// parts counts the parts of a concatenated message whose characters take
// sizes units, at most size units a part. A character that does not fit
// whole in the current part starts the next one: a handset cannot show
// half an escape pair or half a surrogate pair, so the network never
// splits one, and that part is left short.
func parts(sizes []int, size int) int {
	n, used := 1, 0
	for _, c := range sizes {
		if used+c > size {
			n, used = n+1, 0
		}
		used += c
	}
	return n
}

// gsmBasic is the GSM 03.38 default alphabet; gsmExtension the characters
// reached through the escape code, which cost two septets each.
const (
	gsmBasic = "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?" +
		"¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
	gsmExtension = "^{}\\[~]|€\f"
)
