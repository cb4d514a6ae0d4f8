package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	sdklog "go.temporal.io/sdk/log"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func newBuffered(t *testing.T, format Format) (*zap.Logger, *bytes.Buffer) {
	t.Helper()
	var buf bytes.Buffer
	l, err := New(Options{Format: format, Level: "debug", Sink: zapcore.AddSync(&buf)})
	require.NoError(t, err)
	return l, &buf
}

func TestLoggerMasksMessagesFieldsAndErrors(t *testing.T) {
	t.Parallel()
	l, buf := newBuffered(t, FormatJSON)
	l.With(zap.String("to", "+972501234567")).Info("sending to +31612345678",
		zap.Error(errors.New("provider refused +972509999999")),
		zap.Stringer("dest", stringer("+972501111111")))
	out := buf.String()
	for _, raw := range []string{"+972501234567", "+31612345678", "+972509999999", "+972501111111"} {
		require.NotContains(t, out, raw)
	}
	for _, masked := range []string{"+972…67", "+31…78", "+972…99", "+972…11"} {
		require.Contains(t, out, masked)
	}
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line), "JSON format writes one object per line")
}

// zap.Any of a struct, a map or a slice, an object, an array or bytes:
// each is masked too, and stays the JSON it was.
func TestStructuredFieldsAreMasked(t *testing.T) {
	t.Parallel()
	l, buf := newBuffered(t, FormatJSON)
	type attempt struct {
		To     string
		Reason string
		Tries  int
	}
	l.Info("structured",
		zap.Any("attempt", attempt{To: "+31612345678", Reason: "refused +972501234567", Tries: 2}),
		zap.Any("recipients", []string{"+31612345678", "+14155550123"}),
		zap.Any("byKey", map[string]string{"order-1-shipped": "+972501234567"}),
		zap.Strings("list", []string{"+31612345678"}),
		zap.Object("obj", zapcore.ObjectMarshalerFunc(func(e zapcore.ObjectEncoder) error { e.AddString("to", "+31612345678"); return nil })),
		zap.ByteString("raw", []byte("to +31612345678")),
		zap.Inline(zapcore.ObjectMarshalerFunc(func(e zapcore.ObjectEncoder) error { e.AddString("inlined", "+31612345678"); return nil })),
	)
	out := buf.String()
	for _, raw := range []string{"31612345678", "972501234567", "14155550123"} {
		require.NotContains(t, out, raw)
	}
	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line), out)
	require.Equal(t, map[string]any{"To": "+31…78", "Reason": "refused +972…67", "Tries": float64(2)}, line["attempt"], "a struct stays an object")
	require.Equal(t, []any{"+31…78", "+1…23"}, line["recipients"])
	require.Equal(t, map[string]any{"order-1-shipped": "+972…67"}, line["byKey"], "keys are not numbers")
	require.Equal(t, map[string]any{"to": "+31…78"}, line["obj"])
	require.Equal(t, "to +31…78", line["raw"])
}

type stringer string

func (s stringer) String() string { return string(s) }

func TestMaskedErrorKeepsChain(t *testing.T) {
	t.Parallel()
	base := errors.New("boom")
	wrapped := maskedError{fmt.Errorf("for +972501234567: %w", base)}
	require.ErrorIs(t, wrapped, base)
	require.Equal(t, "for +972…67: boom", wrapped.Error())
}

func TestSecretNeverPrints(t *testing.T) {
	t.Parallel()
	s := Secret("sk_live_123")
	type cfg struct{ Token Secret }
	for _, out := range []string{
		fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s", s, cfg{s}, cfg{s}, s),
	} {
		require.NotContains(t, out, "sk_live_123")
	}
	js, err := json.Marshal(cfg{s})
	require.NoError(t, err)
	require.NotContains(t, string(js), "sk_live_123")
	require.Equal(t, "sk_live_123", s.Reveal())

	l, buf := newBuffered(t, FormatJSON)
	l.Info("config", zap.Any("cfg", cfg{s}), zap.Stringer("token", s))
	require.NotContains(t, buf.String(), "sk_live_123")
}

func TestSDKAdapterWritesThroughZap(t *testing.T) {
	t.Parallel()
	l, buf := newBuffered(t, FormatConsole)
	sdk := SDK(l)
	sdk.Info("Started Worker", "TaskQueue", "sms", "to", "+972501234567")
	sdk.(sdklog.WithLogger).With("Namespace", "default").Warn("child")
	out := buf.String()
	require.Contains(t, out, "Namespace")
	require.Contains(t, out, "Started Worker")
	require.Contains(t, out, "TaskQueue")
	require.Contains(t, out, "+972…67")
	require.NotContains(t, out, "+972501234567")
}

func TestNewRejectsUnknownOptions(t *testing.T) {
	t.Parallel()
	_, err := New(Options{Level: "loud"})
	require.ErrorContains(t, err, "use debug, info, warn or error")
	_, err = New(Options{Format: "xml"})
	require.ErrorContains(t, err, `use "json" or "console"`)
}

func TestRedactDSNDropsThePassword(t *testing.T) {
	t.Parallel()
	require.Equal(t, "postgres://smsorch@db:5432/smsorch?sslmode=disable", RedactDSN("postgres://smsorch:s3cret@db:5432/smsorch?sslmode=disable"))
	require.Equal(t, "postgres://postgres@127.0.0.1:5432/postgres", RedactDSN("postgres://postgres@127.0.0.1:5432/postgres"))
	require.NotContains(t, RedactDSN("postgres://u:s3cret@[bad"), "s3cret")
	require.Equal(t, "postgres://u@db/x?password=REDACTED&sslmode=require&sslpassword=REDACTED",
		RedactDSN("postgres://u@db/x?sslmode=require&password=s3cret&sslpassword=k3y"), "passwords given as parameters")
}
