package sms

import (
	"regexp"
	"strings"
)

// e164 finds phone numbers in E.164 form inside free text: a plus sign and
// 7 to 15 digits.
var e164 = regexp.MustCompile(`\+[1-9][0-9]{6,14}`)

// spacedNumber finds phone numbers written with spaces, dashes, dots or
// brackets after a "+" or the international prefix "00".
var spacedNumber = regexp.MustCompile(`(?:\+|\b00)[1-9](?:[\s\-.()]{0,2}\d){6,14}`)

// bareNumber finds candidates for numbers written as digits alone: 11 to
// 15 digits (a country code and a number) or a national form (0 and 9
// or 10 digits). standsAlone keeps those that are not inside a key.
var bareNumber = regexp.MustCompile(`[1-9]\d{10,14}|0[1-9]\d{8,9}`)

// MaskPhone masks one phone number for logs and summaries, keeping enough to
// tell numbers apart in a support conversation: "+972501234567" becomes
// "+97250…67". Numbers too short to keep both ends are reduced to their
// first characters.
func MaskPhone(number string) string {
	if len(number) <= 4 {
		return "…"
	}
	keep := 6 // "+" and the first five digits
	if len(number) < 11 {
		keep = 3
	}
	return number[:keep] + "…" + number[len(number)-2:]
}

// MaskPhones masks every phone number inside s: E.164, and numbers
// written with spaces or other separators, with 00 for +, or as a bare
// run of digits (11 to 15, or a national 0 and 9 or 10) that stands alone,
// not inside a key such as order-58213-shipped.
func MaskPhones(s string) string {
	if strings.Contains(s, "+") {
		s = e164.ReplaceAllStringFunc(s, MaskPhone)
	}
	s = spacedNumber.ReplaceAllStringFunc(s, maskLoose)
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

// standsAlone reports whether s[i:j] is not part of a longer word, number
// or key.
func standsAlone(s string, i, j int) bool {
	part := func(c byte) bool {
		return isDigit(c) || c == '-' || c == '~' || c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') || c >= 0x80
	}
	return (i == 0 || !part(s[i-1])) && (j == len(s) || !part(s[j]))
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// maskLoose keeps the first three and the last two digits of a number
// written any way, and drops what is between.
func maskLoose(m string) string {
	var digits []byte
	for i := 0; i < len(m); i++ {
		if isDigit(m[i]) {
			digits = append(digits, m[i])
		}
	}
	if len(digits) < 7 {
		return m
	}
	prefix := ""
	if strings.HasPrefix(m, "+") {
		prefix = "+"
	}
	return prefix + string(digits[:3]) + "…" + string(digits[len(digits)-2:])
}
