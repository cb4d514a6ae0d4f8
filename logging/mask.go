package logging

import (
	"net/url"
	"regexp"
	"strings"

	"go.uber.org/zap/zapcore"
)

// e164 finds phone numbers in E.164 form inside free text: a plus sign and
// 7 to 15 digits. Only the plus form is masked; bare digit runs are too often
// ids and timestamps.
var e164 = regexp.MustCompile(`\+[1-9][0-9]{6,14}`)

// looseNumber finds phone numbers as people write them: with spaces,
// dashes, dots or brackets after a "+" or the international prefix
// "00", and bare runs of 11 to 15 digits (a country code and a number)
// that stand alone (not inside a key such as order-58213-shipped).
var looseNumber = regexp.MustCompile(`(?:\+|\b00)[1-9](?:[\s\-.()]{0,2}\d){6,14}|(?:^|[^\w\-~])[1-9]\d{10,14}(?:$|[^\w\-~])`)

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
// run of 11 to 15 digits.
func MaskPhones(s string) string {
	if strings.Contains(s, "+") {
		s = e164.ReplaceAllStringFunc(s, MaskPhone)
	}
	return looseNumber.ReplaceAllStringFunc(s, func(m string) string {
		// Keep what the pattern took around a bare run.
		lead, tail := "", ""
		if m != "" && !isDigitOrPlus(m[0]) {
			lead, m = m[:1], m[1:]
		}
		if m != "" && !isDigit(m[len(m)-1]) {
			tail, m = m[len(m)-1:], m[:len(m)-1]
		}
		return lead + maskLoose(m) + tail
	})
}

func isDigit(b byte) bool       { return b >= '0' && b <= '9' }
func isDigitOrPlus(b byte) bool { return isDigit(b) || b == '+' }

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

// maskingCore rewrites the message and the string and error fields of every
// entry through MaskPhones before the wrapped core encodes it.
type maskingCore struct{ zapcore.Core }

func (c maskingCore) With(fields []zapcore.Field) zapcore.Core {
	return maskingCore{c.Core.With(maskFields(fields))}
}

func (c maskingCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(ent.Level) {
		return ce.AddCore(ent, c)
	}
	return ce
}

func (c maskingCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	ent.Message = MaskPhones(ent.Message)
	return c.Core.Write(ent, maskFields(fields))
}

func maskFields(fields []zapcore.Field) []zapcore.Field {
	out := make([]zapcore.Field, len(fields))
	for i, f := range fields {
		switch f.Type {
		case zapcore.StringType:
			f.String = MaskPhones(f.String)
		case zapcore.ErrorType:
			if err, ok := f.Interface.(error); ok && err != nil {
				f = zapcore.Field{Key: f.Key, Type: zapcore.ErrorType, Interface: maskedError{err}}
			}
		case zapcore.StringerType:
			if s, ok := f.Interface.(interface{ String() string }); ok {
				f = zapcore.Field{Key: f.Key, Type: zapcore.StringType, String: MaskPhones(s.String())}
			}
		}
		out[i] = f
	}
	return out
}

// maskedError keeps the error chain (for errors.Is/As in hooks) but prints masked.
type maskedError struct{ err error }

func (e maskedError) Error() string { return MaskPhones(e.err.Error()) }
func (e maskedError) Unwrap() error { return e.err }

// RedactDSN drops the password from a database address (postgres://user:
// password@host/db), for logs and errors. An address it cannot read is
// not shown at all.
func RedactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(an unreadable database address)"
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	// Passwords may also come as parameters (pgx reads both).
	q := u.Query()
	for _, k := range []string{"password", "sslpassword"} {
		if q.Has(k) {
			q.Set(k, "REDACTED")
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}
