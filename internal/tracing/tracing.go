// Package tracing follows one event across processes with OpenTelemetry:
// the intake's request, the workflow's start, its activities and each
// provider request, which carries the W3C traceparent header. Spans name
// the event key, the provider, the attempt and the outcome class; never
// the recipient or the text.
//
// Setup exports the spans over OTLP when the standard variables name a
// collector (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), and nothing otherwise. Without an
// exporter a trace context that arrives (an application's own span, a
// sender's traceparent) still travels on: to Temporal's headers and to the
// providers.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
	"go.uber.org/zap"
)

// The attributes this module puts on its spans. The workflow id, which
// is the event key, is also on every Temporal span as temporalWorkflowID.
const (
	// EventKey is the event's key, the workflow id (order-58213-shipped).
	EventKey = attribute.Key("sms.event_key")
	// SendKey is the Idempotency-Key of a send (the event key, or a
	// resend's key).
	SendKey = attribute.Key("sms.send_key")
	// Provider is bird or sendy.
	Provider = attribute.Key("sms.provider")
	// Attempt is the send attempt's number for its key.
	Attempt = attribute.Key("sms.attempt")
	// Outcome is the class of a provider's answer (accepted, replayed,
	// rejected, unknown, throttled, not_executed, …) or of a lookup.
	Outcome = attribute.Key("sms.outcome")
	// Status is the delivery status the first lookup of a Send found
	// (delivered, sent, queued, failed, …), on the Send's span.
	Status = attribute.Key("sms.status")
	// Answer is what the intake answered (started, existing, invalid,
	// conflict, unauthorized, …).
	Answer = attribute.Key("sms.answer")
)

// Annotate adds attributes to the span ctx carries (an activity's, the
// intake request's); without one it does nothing.
func Annotate(ctx context.Context, kv ...attribute.KeyValue) {
	trace.SpanFromContext(ctx).SetAttributes(kv...)
}

// LogTraceID is the trace_id log field of the span ctx carries, so a log
// line leads to its trace; no field when there is none.
func LogTraceID(ctx context.Context) zap.Field {
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		return zap.String("trace_id", sc.TraceID().String())
	}
	return zap.Skip()
}

// traceContext is the only propagator on the wire outside Temporal: a
// sender's or our baggage is never passed to a provider, and the intake
// reads none from the Internet.
var traceContext = propagation.TraceContext{}

// Handler wraps an HTTP server's handler: each request is a server span,
// the child of the traceparent it arrived with, named after the route.
func Handler(h http.Handler, service string) http.Handler {
	return otelhttp.NewHandler(h, service,
		otelhttp.WithPropagators(traceContext),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			if r.Pattern != "" {
				return r.Pattern
			}
			return r.Method
		}))
}

// Transport wraps a provider client's transport: each request is a client
// span named after the provider ("POST bird"), and carries traceparent.
func Transport(base http.RoundTripper, providerName string) http.RoundTripper {
	return otelhttp.NewTransport(base,
		otelhttp.WithPropagators(traceContext),
		otelhttp.WithSpanOptions(trace.WithAttributes(Provider.String(providerName))),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + providerName }))
}

// TemporalInterceptor is the SDK's OpenTelemetry interceptor: a client's
// starts, signals and updates become spans whose context travels in the
// Temporal header to the workflow and its activities. It uses the global
// tracer provider, which Setup sets. A trace header the worker cannot
// read (sealed under a key it does not hold, so its refusing codec marked
// it) only loses the parent span: it must not fail the workflow task,
// which would leave the run stuck instead of refusing the decision in its
// timeline.
func TemporalInterceptor() (interceptor.Interceptor, error) {
	return temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{AllowInvalidParentSpans: true})
}

// FlushTimeout bounds how long a program's stop waits for its last spans.
const FlushTimeout = 5 * time.Second

// Settings are the standard OpenTelemetry variables Setup reads.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
)

// Setup installs the propagators and, when the environment names an OTLP
// collector, a tracer provider that exports to it in batches; service is
// the service.name unless OTEL_SERVICE_NAME says otherwise. It returns
// where spans go ("" for nowhere) and a shutdown that flushes them, for
// at most FlushTimeout. A
// setting it cannot follow is an error that says what to set instead.
func Setup(ctx context.Context, service string, log *zap.Logger) (where string, shutdown func() error, err error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	shutdown = func() error { return nil }
	env := func(names ...string) string {
		for _, n := range names {
			if v := strings.TrimSpace(os.Getenv(n)); v != "" {
				return v
			}
		}
		return ""
	}
	if strings.EqualFold(env(EnvSDKDisabled), "true") {
		return "", shutdown, nil
	}
	switch exporter := env(EnvTracesExporter); exporter {
	case "", "otlp":
	case "none":
		return "", shutdown, nil
	default:
		return "", nil, fmt.Errorf("%s=%q: traces are exported over OTLP only; set it to otlp or none (or leave it unset)", EnvTracesExporter, exporter)
	}
	endpoint := env(EnvTracesEndpoint, EnvEndpoint)
	if endpoint == "" {
		return "", shutdown, nil
	}
	if u, perr := url.Parse(endpoint); perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", nil, fmt.Errorf("the OTLP endpoint %q (%s or %s) is not a URL: give it as http://collector:4318 (or https://…, or :4317 with %s=grpc)",
			endpoint, EnvTracesEndpoint, EnvEndpoint, EnvProtocol)
	}
	var exp sdktrace.SpanExporter
	// The specification's default is http/protobuf; the exporters read
	// the endpoint, headers, certificates and timeouts themselves.
	switch protocol := env(EnvTracesProtocol, EnvProtocol); protocol {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
		where = "OTLP http/protobuf " + endpoint
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
		where = "OTLP grpc " + endpoint
	default:
		return "", nil, fmt.Errorf("%s=%q: traces are exported with http/protobuf or grpc; set one of them", EnvProtocol, protocol)
	}
	if err != nil {
		return "", nil, fmt.Errorf("the OTLP trace exporter (%s): %w", endpoint, err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
		resource.WithTelemetrySDK(),
		resource.WithHost())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return "", nil, fmt.Errorf("the trace resource (OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	// The sampler follows OTEL_TRACES_SAMPLER; the default samples what
	// the parent sampled, and every root.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	if log != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			log.Warn("tracing: spans could not be exported; check the collector at "+endpoint, zap.Error(err))
		}))
	}
	return where, func() error {
		flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), FlushTimeout)
		defer cancel()
		return tp.Shutdown(flush)
	}, nil
}
