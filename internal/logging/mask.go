package logging

import (
	"encoding/json"
	"net/url"

	"go.uber.org/zap/zapcore"

	"github.com/acme/smsorch/sms"
)

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
	ent.Message = sms.MaskPhones(ent.Message)
	return c.Core.Write(ent, maskFields(fields))
}

func maskFields(fields []zapcore.Field) []zapcore.Field {
	out := make([]zapcore.Field, len(fields))
	for i, f := range fields {
		switch f.Type {
		case zapcore.StringType:
			f.String = sms.MaskPhones(f.String)
		case zapcore.ErrorType:
			if err, ok := f.Interface.(error); ok && err != nil {
				f = zapcore.Field{Key: f.Key, Type: zapcore.ErrorType, Interface: maskedError{err}}
			}
		case zapcore.StringerType:
			if s, ok := f.Interface.(interface{ String() string }); ok {
				f = zapcore.Field{Key: f.Key, Type: zapcore.StringType, String: sms.MaskPhones(s.String())}
			}
		case zapcore.ByteStringType:
			f = zapcore.Field{Key: f.Key, Type: zapcore.StringType, String: sms.MaskPhones(string(f.Interface.([]byte)))}
		case zapcore.ReflectType, zapcore.ObjectMarshalerType, zapcore.ArrayMarshalerType, zapcore.InlineMarshalerType:
			// zap.Any of a struct, a map, a slice: encoded here, masked,
			// and written as the JSON it was (or as a string, when masking
			// made it JSON no more).
			f = maskedJSON(f)
		}
		out[i] = f
	}
	return out
}

// maskedJSON encodes a structured field to JSON and masks the phone
// numbers in it.
func maskedJSON(f zapcore.Field) zapcore.Field {
	enc := zapcore.NewMapObjectEncoder()
	f.AddTo(enc)
	v, ok := enc.Fields[f.Key]
	var raw []byte
	var err error
	if ok {
		raw, err = json.Marshal(v)
	} else { // an inline object adds its own keys: they go under one
		f.Key = "inline"
		raw, err = json.Marshal(enc.Fields)
	}
	if err != nil {
		return zapcore.Field{Key: f.Key, Type: zapcore.StringType, String: "(a value that could not be encoded: " + sms.MaskPhones(err.Error()) + ")"}
	}
	masked := sms.MaskPhones(string(raw))
	if !json.Valid([]byte(masked)) {
		return zapcore.Field{Key: f.Key, Type: zapcore.StringType, String: masked}
	}
	return zapcore.Field{Key: f.Key, Type: zapcore.ReflectType, Interface: json.RawMessage(masked)}
}

// maskedError keeps the error chain (for errors.Is/As in hooks) but prints masked.
type maskedError struct{ err error }

func (e maskedError) Error() string { return sms.MaskPhones(e.err.Error()) }
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
