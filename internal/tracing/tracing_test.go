package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
)

// clearEnv unsets the variables Setup reads, for one test.
func clearEnv(t *testing.T) {
	for _, k := range []string{EnvEndpoint, EnvTracesEndpoint, EnvProtocol, EnvTracesProtocol, EnvTracesExporter, EnvSDKDisabled, "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"} {
		t.Setenv(k, "")
	}
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })
}

func TestSetupExportsOnlyWhereTheEnvironmentSays(t *testing.T) {
	ctx := context.Background()
	for name, c := range map[string]struct {
		env   map[string]string
		where string
		err   string
	}{
		"nothing set":                {},
		"disabled":                   {env: map[string]string{EnvEndpoint: "http://127.0.0.1:4318", EnvSDKDisabled: "true"}},
		"exporter none":              {env: map[string]string{EnvEndpoint: "http://127.0.0.1:4318", EnvTracesExporter: "none"}},
		"http by default":            {env: map[string]string{EnvEndpoint: "http://127.0.0.1:4318"}, where: "OTLP http/protobuf http://127.0.0.1:4318"},
		"traces endpoint first":      {env: map[string]string{EnvEndpoint: "http://a:4318", EnvTracesEndpoint: "http://b:4318/v1/traces"}, where: "OTLP http/protobuf http://b:4318/v1/traces"},
		"grpc":                       {env: map[string]string{EnvEndpoint: "http://127.0.0.1:4317", EnvProtocol: "grpc"}, where: "OTLP grpc http://127.0.0.1:4317"},
		"another exporter":           {env: map[string]string{EnvEndpoint: "http://127.0.0.1:4318", EnvTracesExporter: "zipkin"}, err: "OTEL_TRACES_EXPORTER=\"zipkin\": traces are exported over OTLP only"},
		"an endpoint without scheme": {env: map[string]string{EnvEndpoint: "collector:4318"}, err: "is not a URL: give it as http://collector:4318"},
		"json":                       {env: map[string]string{EnvEndpoint: "http://127.0.0.1:4318", EnvProtocol: "http/json"}, err: "set one of them"},
	} {
		t.Run(name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			where, shutdown, err := Setup(ctx, "test", zap.NewNop())
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.where, where)
			require.NoError(t, shutdown())
		})
	}
}

// TestSetupExportsOverOTLPHTTP is the path a deployment takes: a span
// ended in the process reaches the collector with the service's name.
func TestSetupExportsOverOTLPHTTP(t *testing.T) {
	clearEnv(t)
	var mu sync.Mutex
	var got []*coltracepb.ExportTraceServiceRequest
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, &req)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(nil)
	}))
	defer collector.Close()
	t.Setenv(EnvEndpoint, collector.URL)
	t.Setenv("OTEL_SERVICE_NAME", "smsorch-test")

	ctx := context.Background()
	where, shutdown, err := Setup(ctx, "smsorch-worker", zap.NewNop())
	require.NoError(t, err)
	require.Equal(t, "OTLP http/protobuf "+collector.URL, where)
	spanCtx, span := otel.Tracer("test").Start(ctx, "RunActivity:Send")
	Annotate(spanCtx, EventKey.String("order-1-shipped"))
	span.End()
	require.NoError(t, shutdown()) // flushes

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 1)
	rs := got[0].GetResourceSpans()
	require.Len(t, rs, 1)
	service := ""
	for _, kv := range rs[0].GetResource().GetAttributes() {
		if kv.GetKey() == "service.name" {
			service = kv.GetValue().GetStringValue()
		}
	}
	require.Equal(t, "smsorch-test", service, "OTEL_SERVICE_NAME names the service")
	spans := rs[0].GetScopeSpans()[0].GetSpans()
	require.Len(t, spans, 1)
	require.Equal(t, "RunActivity:Send", spans[0].GetName())
	require.Equal(t, string(EventKey), spans[0].GetAttributes()[0].GetKey())
}

func TestLogTraceIDNamesTheTraceOfTheContext(t *testing.T) {
	require.Equal(t, zap.Skip(), LogTraceID(context.Background()))
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))
	require.Equal(t, zap.String("trace_id", "4bf92f3577b34da6a3ce929d0e0e4736"), LogTraceID(ctx))
}
