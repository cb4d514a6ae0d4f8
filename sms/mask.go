package sms

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/nyaruka/phonenumbers"
)

// e164 finds phone numbers in E.164 form inside free text: a plus sign and
// 7 to 15 digits.
var e164 = regexp.MustCompile(`\+[1-9][0-9]{6,14}`)

// spacedNumber finds phone numbers written with spaces, dashes, dots or
// brackets after a "+" or the international prefix "00".
var spacedNumber = regexp.MustCompile(`(?:\+|\b00)[1-9](?:[\s\-.()]{0,2}\d){6,14}`)

// nationalNumber finds national numbers written in groups, as people
// write them: 06-12345678, 06 12 34 56 78, (06) 1234 5678. maskNational
// keeps those of 10 or 11 digits.
var nationalNumber = regexp.MustCompile(`\(?0[1-9]\d*\)?(?:[ \-.]\(?\d+\)?)+`)

// bareNumber finds candidates for numbers written as digits alone: 11 to
// 15 digits (a country code and a number) or a national form (0 and 9
// or 10 digits). standsAlone keeps those that are not inside a key.
var bareNumber = regexp.MustCompile(`[1-9]\d{10,14}|0[1-9]\d{8,9}`)

// MaskPhone masks one phone number for logs, timelines, answers and
// summaries by the one rule used everywhere: keep the country code and the
// last two digits, "+31612345678" becomes "+31…78". That tells numbers
// apart in a support conversation (with the event's key) and leaves a
// hundred million candidates for a Dutch mobile. A number without a
// country code it knows keeps its last two digits; one too short to keep
// them is reduced to "…".
func MaskPhone(number string) string {
	digits := digitsOf(number)
	if len(digits) < 5 {
		return "…"
	}
	if strings.HasPrefix(strings.TrimSpace(number), "+") {
		return "+" + countryCode(digits) + "…" + string(digits[len(digits)-2:])
	}
	return "…" + string(digits[len(digits)-2:])
}

// countryCode is the country calling code that digits (an international
// number without its +) begins with, or "" when none is known. Calling
// codes are prefix-free, so the first one found is the one.
func countryCode(digits []byte) string {
	for n := 1; n <= 3 && n < len(digits); n++ {
		cc, err := strconv.Atoi(string(digits[:n]))
		if err != nil {
			return ""
		}
		if len(phonenumbers.GetRegionCodesForCountryCode(cc)) > 0 {
			return string(digits[:n])
		}
	}
	return ""
}

// MaskPhones masks every phone number inside s: E.164, and numbers
// written with spaces or other separators, with 00 for +, or as a bare
// run of digits (11 to 15, or a national 0 and 9 or 10) that stands alone,
// not inside a key such as order-58213-shipped. A number written with
// other spaces (no-break, thin), a full-width plus, a percent-encoded
// "+" or space, or the digits of another script is masked too: such
// characters are folded to their ASCII form first, in the whole text.
func MaskPhones(s string) string {
	s = foldForMasking(s)
	if strings.Contains(s, "+") {
		s = e164.ReplaceAllStringFunc(s, MaskPhone)
	}
	s = spacedNumber.ReplaceAllStringFunc(s, maskLoose)
	s = replaceStandingAlone(s, nationalNumber, func(m string) (string, bool) {
		n := len(digitsOf(m))
		return "…" + m[len(m)-2:], (n == 10 || n == 11) && isDigit(m[len(m)-1]) && isDigit(m[len(m)-2])
	})
	var b strings.Builder
	last := 0
	for _, m := range bareNumber.FindAllStringIndex(s, -1) {
		if !standsAlone(s, m[0], m[1]) {
			continue
		}
		b.WriteString(s[last:m[0]])
		b.WriteString(maskLoose(s[m[0]:m[1]]))
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

// replaceStandingAlone replaces each match of re in s that stands alone
// with what mask makes of it, when mask says so.
func replaceStandingAlone(s string, re *regexp.Regexp, mask func(string) (string, bool)) string {
	var b strings.Builder
	last := 0
	for _, m := range re.FindAllStringIndex(s, -1) {
		if !standsAlone(s, m[0], m[1]) {
			continue
		}
		masked, ok := mask(s[m[0]:m[1]])
		if !ok {
			continue
		}
		b.WriteString(s[last:m[0]])
		b.WriteString(masked)
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

// standsAlone reports whether s[i:j] is not part of a longer word, number
// or key.
func standsAlone(s string, i, j int) bool {
	part := func(c byte) bool {
		return isDigit(c) || c == '-' || c == '~' || c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') || c >= 0x80
	}
	return (i == 0 || !part(s[i-1])) && (j == len(s) || !part(s[j]))
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// digitsOf is the digits of s, without what is between them.
func digitsOf(s string) []byte {
	var digits []byte
	for i := 0; i < len(s); i++ {
		if isDigit(s[i]) {
			digits = append(digits, s[i])
		}
	}
	return digits
}

// maskLoose masks a number written any way by MaskPhone's rule: an
// international one (after "+" or "00", or eleven digits and more) keeps
// its country code, a national one only its last two digits.
func maskLoose(m string) string {
	digits := digitsOf(m)
	if len(digits) < 7 {
		return m
	}
	switch {
	case strings.HasPrefix(m, "+"):
	case strings.HasPrefix(m, "00"):
		digits = digits[2:]
	case digits[0] == '0' || len(digits) < 11: // national: no country code
		return "…" + string(digits[len(digits)-2:])
	}
	return "+" + countryCode(digits) + "…" + string(digits[len(digits)-2:])
}

// foldForMasking writes the characters a phone number can be written
// with in their ASCII form: every Unicode space as a space, a full-width
// or small plus as "+", "%2B" and "%20" (a number in a URL) as "+" and a
// space, and a decimal digit of any script as its ASCII digit. A text
// with none of them is returned as it is.
func foldForMasking(s string) string {
	if !strings.Contains(s, "%2") && strings.IndexFunc(s, foldedRune) < 0 {
		return s // the common case, "…" of a masked number included
	}
	s = strings.NewReplacer("%2B", "+", "%2b", "+", "%20", " ").Replace(s)
	return strings.Map(func(r rune) rune {
		switch {
		case !foldedRune(r):
			return r
		case r == '\uFF0B' || r == '\uFE62': // full-width and small plus
			return '+'
		case unicode.Is(unicode.Nd, r):
			return '0' + rune(digitValue(r))
		}
		return ' '
	}, s)
}

// foldedRune reports a character foldForMasking writes in ASCII: a
// non-ASCII space, plus or decimal digit.
func foldedRune(r rune) bool {
	if r < 0x80 {
		return false
	}
	return r == '\uFF0B' || r == '\uFE62' || unicode.IsSpace(r) || unicode.Is(unicode.Zs, r) || unicode.Is(unicode.Nd, r)
}

// digitValue is the value of r, a decimal digit (Unicode Nd): every
// script's digits stand in runs of ten from its zero, so the value is the
// digit's place in its run of digits, modulo ten.
func digitValue(r rune) int {
	n := 0
	for unicode.Is(unicode.Nd, r-rune(n)-1) {
		n++
	}
	return n % 10
}
