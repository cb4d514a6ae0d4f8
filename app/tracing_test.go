package app

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/codec"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/intake"
	"github.com/acme/smsorch/internal/tracing"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/starter"
)

// TestOneTracePerEventFromIntakeToProvider follows two events, one posted
// to the intake with the sender's traceparent and one sent from Go under
// the application's own span, each through its start, its workflow and
// its Send activity to the provider's request, which must carry the
// trace. It sets the global tracer provider, so it does not run in
// parallel with the package's other tests.
func TestOneTracePerEventFromIntakeToProvider(t *testing.T) {
	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	previous := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(previous) })

	ctx := context.Background()
	const (
		secret    = "intake-trace-secret-5e1f0a9c2b7d"
		recipient = "+31612345678"
		text      = "Your code is 731904"
	)
	keySpec, err := codec.NewKey("trace-1")
	require.NoError(t, err)
	ring, err := codec.ParseKeys(keySpec)
	require.NoError(t, err)
	a, err := Start(ctx, Config{
		Dev: true, DataDir: t.TempDir(), FrontendAddress: "127.0.0.1:0", UIAddress: Off,
		SimulatorAddress: "127.0.0.1:0", IntakeAddress: "127.0.0.1:0", IntakeSecret: secret,
		Simulator: simulator.Config{DeliveryDelay: 100 * time.Millisecond},
		Codec:     ring,
		Policies: map[provider.Name]activities.Policy{
			provider.Bird:  {StatusPollInitial: 100 * time.Millisecond, StatusPollMax: 200 * time.Millisecond},
			provider.Sendy: {StatusPollInitial: 100 * time.Millisecond, StatusPollMax: 200 * time.Millisecond},
		},
	}, zap.NewNop())
	require.NoError(t, err)
	defer func() { _ = a.Stop() }()
	app := tp.Tracer("shop")

	// 1. A sender that traces its own work posts to the intake.
	posted, checkout := app.Start(ctx, "checkout")
	body := fmt.Sprintf(`{"kind":"order","id":"7001","stage":"shipped","provider":"bird","to":%q,"text":%q}`, recipient, text)
	req, err := http.NewRequestWithContext(posted, http.MethodPost, a.IntakeURL+"/v1/events", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range intake.Sign(secret, time.Now(), []byte(body)) {
		req.Header.Set(k, v)
	}
	propagation.TraceContext{}.Inject(posted, propagation.HeaderCarrier(req.Header))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	answer, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(answer))
	checkout.End()

	// 2. An application sends from Go under its own span.
	sent, job := app.Start(ctx, "nightly reminders")
	_, err = starter.New(a.Client).Send(sent, starter.Event{Kind: "order", ID: "7002", Stage: "shipped", Provider: "sendy", To: recipient, Text: text})
	require.NoError(t, err)
	job.End()

	for _, key := range []string{"order-7001-shipped", "order-7002-shipped"} {
		res, err := starter.New(a.Client).Wait(ctx, key)
		require.NoError(t, err)
		require.Equal(t, contract.Delivered, res.State, key)
	}
	require.NoError(t, a.Stop()) // the workflow spans end with their runs; the rest is flushed

	spans := exporter.GetSpans()
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID()] = s
		// Spans name the event, never its recipient or text.
		for _, leak := range []string{recipient, "31612345678", "612345678", text, "731904"} {
			require.NotContains(t, s.Name, leak)
			for _, kv := range s.Attributes {
				require.NotContains(t, kv.Value.String(), leak, "span %q attribute %s", s.Name, kv.Key)
			}
		}
	}
	attr := func(s tracetest.SpanStub, k attribute.Key) string {
		for _, kv := range s.Attributes {
			if kv.Key == k {
				return kv.Value.String()
			}
		}
		return ""
	}
	// below returns the spans of the trace named name whose ancestors
	// include parent, at least one.
	below := func(root trace.SpanContext, parent tracetest.SpanStub, name string) []tracetest.SpanStub {
		t.Helper()
		var found []tracetest.SpanStub
		var names []string
		for _, s := range spans {
			if s.SpanContext.TraceID() != root.TraceID() {
				continue
			}
			names = append(names, s.Name)
			if s.Name != name {
				continue
			}
			for p, ok := byID[s.Parent.SpanID()]; ok; p, ok = byID[p.Parent.SpanID()] {
				if p.SpanContext.SpanID() == parent.SpanContext.SpanID() {
					found = append(found, s)
					break
				}
			}
		}
		require.NotEmpty(t, found, "%q below %q in the trace, which holds %q", name, parent.Name, names)
		return found
	}
	find := func(root trace.SpanContext, parent tracetest.SpanStub, name string) tracetest.SpanStub {
		t.Helper()
		found := below(root, parent, name)
		require.Len(t, found, 1, "one %q below %q", name, parent.Name)
		return found[0]
	}
	follow := func(root tracetest.SpanStub, key, provider, intakeSpan string, firstLook bool) {
		t.Helper()
		top := root
		if intakeSpan != "" {
			top = find(root.SpanContext, root, intakeSpan)
			require.Equal(t, trace.SpanKindServer, top.SpanKind)
			require.Equal(t, key, attr(top, tracing.EventKey))
			require.Equal(t, "started", attr(top, tracing.Answer))
		}
		start := find(root.SpanContext, top, "StartWorkflow:"+contract.WorkflowName)
		require.Equal(t, key, attr(start, "temporalWorkflowID"))
		run := find(root.SpanContext, start, "RunWorkflow:"+contract.WorkflowName)
		send := find(root.SpanContext, run, "RunActivity:Send")
		require.Equal(t, key, attr(send, tracing.EventKey))
		require.Equal(t, key, attr(send, tracing.SendKey))
		require.Equal(t, provider, attr(send, tracing.Provider))
		require.Equal(t, "1", attr(send, tracing.Attempt))
		require.Equal(t, "accepted", attr(send, tracing.Outcome))
		post := find(root.SpanContext, send, "POST "+provider)
		require.Equal(t, trace.SpanKindClient, post.SpanKind)
		require.Regexp(t, `^2\d\d$`, attr(post, "http.response.status_code"))
		require.Equal(t, provider, attr(post, tracing.Provider))
		// At a provider whose lookups are not paced, the send looks its
		// message up once after the first tracking interval; when that
		// look did not find it delivered, the run's Status lookups did.
		looked := attr(send, tracing.Status)
		if firstLook {
			require.NotEmpty(t, looked, "the send's first lookup names the status it found")
			find(root.SpanContext, send, "GET "+provider)
		} else {
			require.Empty(t, looked, "a send at %s, whose lookups are paced, looks nothing up", provider)
		}
		if looked != "delivered" {
			lookups := below(root.SpanContext, run, "RunActivity:Status")
			require.Equal(t, "delivered", attr(lookups[len(lookups)-1], tracing.Outcome))
			// The lookup that saw it delivered asked the provider (a first
			// attempt that is only the first wait asks nothing).
			find(root.SpanContext, lookups[len(lookups)-1], "GET "+provider)
		}

		// The provider received the send span's context.
		reqs := a.Sim.Requests(simulator.Filter{Provider: provider, Key: key})
		require.NotEmpty(t, reqs)
		want := fmt.Sprintf("00-%s-%s-01", post.SpanContext.TraceID(), post.SpanContext.SpanID())
		require.Equal(t, want, reqs[0].Traceparent, "the traceparent %s received", provider)
	}
	follow(tracetest.SpanStubFromReadOnlySpan(checkout.(sdktrace.ReadOnlySpan)), "order-7001-shipped", "bird", "POST /v1/events", true)
	follow(tracetest.SpanStubFromReadOnlySpan(job.(sdktrace.ReadOnlySpan)), "order-7002-shipped", "sendy", "", false)
}
