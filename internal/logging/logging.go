// Package logging builds the one zap logger the process uses, for our code,
// the Temporal SDK and the embedded Temporal server alike.
//
// Two rules hold for every line it writes: phone numbers are masked (see
// MaskPhones) and secrets never appear (see Secret). Callers should pass
// masked values already; the masking core is the last line of defence for
// anything that slips through inside an error message or a third-party log.
package logging

import (
	"fmt"
	"os"
	"strings"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Format selects how log lines are written.
type Format string

const (
	// FormatJSON writes one JSON object per line: for production and log shippers.
	FormatJSON Format = "json"
	// FormatConsole writes readable, coloured lines: for a developer's terminal.
	FormatConsole Format = "console"
)

// Options configures New. The zero value gives JSON at info level on stderr.
type Options struct {
	// Format is FormatJSON (default) or FormatConsole.
	Format Format
	// Level is a zap level name: debug, info (default), warn, error.
	Level string
	// Sink receives the lines; default os.Stderr.
	Sink zapcore.WriteSyncer
}

// New builds the process logger. Invalid options are reported with the
// accepted values so the caller can fix the flag or variable.
func New(opts Options) (*zap.Logger, error) {
	level := zapcore.InfoLevel
	if opts.Level != "" {
		if err := level.UnmarshalText([]byte(strings.ToLower(opts.Level))); err != nil {
			return nil, fmt.Errorf("log level %q is not known: use debug, info, warn or error", opts.Level)
		}
	}
	sink := opts.Sink
	if sink == nil {
		sink = zapcore.Lock(os.Stderr)
	}
	var enc zapcore.Encoder
	switch opts.Format {
	case "", FormatJSON:
		cfg := zap.NewProductionEncoderConfig()
		cfg.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewJSONEncoder(cfg)
	case FormatConsole:
		cfg := zap.NewDevelopmentEncoderConfig()
		cfg.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		cfg.EncodeLevel = zapcore.CapitalColorLevelEncoder
		enc = zapcore.NewConsoleEncoder(cfg)
	default:
		return nil, fmt.Errorf("log format %q is not known: use %q or %q", opts.Format, FormatJSON, FormatConsole)
	}
	core := zapcore.NewCore(enc, sink, level)
	return zap.New(maskingCore{core}, zap.AddCaller()), nil
}

// Secret holds a credential. It prints, formats and marshals as "[redacted]"
// so that a config struct logged by mistake leaks nothing; Reveal gives the
// value to the one place that needs it (an Authorization header).
type Secret string

const redacted = "[redacted]"

// Reveal returns the secret value.
func (s Secret) Reveal() string { return string(s) }

// String implements fmt.Stringer.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString implements fmt.GoStringer, so %#v hides it too.
func (s Secret) GoString() string { return s.String() }

// MarshalText implements encoding.TextMarshaler (JSON, YAML, zap.Any).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
