package logging

import (
	sdklog "go.temporal.io/sdk/log"
	"go.uber.org/zap"
)

// SDK adapts a zap logger to the Temporal SDK's log.Logger, so the SDK's own
// lines (worker start, activity failures, workflow panics) go through the
// same encoder and masking as ours.
func SDK(l *zap.Logger) sdklog.Logger {
	return sdkLogger{l.WithOptions(zap.AddCallerSkip(1)).Sugar()}
}

type sdkLogger struct{ s *zap.SugaredLogger }

var (
	_ sdklog.Logger          = sdkLogger{}
	_ sdklog.WithLogger      = sdkLogger{}
	_ sdklog.WithSkipCallers = sdkLogger{}
)

func (l sdkLogger) Debug(msg string, kv ...any) { l.s.Debugw(msg, kv...) }
func (l sdkLogger) Info(msg string, kv ...any)  { l.s.Infow(msg, kv...) }
func (l sdkLogger) Warn(msg string, kv ...any)  { l.s.Warnw(msg, kv...) }
func (l sdkLogger) Error(msg string, kv ...any) { l.s.Errorw(msg, kv...) }

func (l sdkLogger) With(kv ...any) sdklog.Logger { return sdkLogger{l.s.With(kv...)} }

func (l sdkLogger) WithCallerSkip(skip int) sdklog.Logger {
	return sdkLogger{l.s.WithOptions(zap.AddCallerSkip(skip))}
}
