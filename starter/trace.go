package starter

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/acme/smsorch/contract"
)

// The start is a raw request (its answer says whether it started the
// run), which a client's interceptors do not see. So the starter makes
// the span the SDK's OpenTelemetry interceptor would make, and writes it
// where that interceptor, on the worker, reads a run's parent: the
// "_tracer-data" header, W3C trace context and baggage in a JSON map.
const traceHeader = "_tracer-data"

var tracePropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// traceStart starts the span of the start of key's run, the child of the
// span ctx carries (an application's, the intake request's), from the
// global tracer provider. header carries it to the run; it is nil when
// there is nothing to carry (no tracer provider and no span in ctx).
// end ends the span with the start's error.
func traceStart(ctx context.Context, key string) (header *commonpb.Header, end func(error)) {
	ctx, span := otel.GetTracerProvider().Tracer("temporal-sdk-go").Start(ctx, "StartWorkflow:"+contract.WorkflowName,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attribute.String("temporalWorkflowID", key)))
	end = func(err error) {
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
	carrier := propagation.MapCarrier{}
	tracePropagator.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return nil, end
	}
	p, err := converter.GetDefaultDataConverter().ToPayload(map[string]string(carrier))
	if err != nil {
		return nil, end // a map of strings always converts; a run without its parent still runs
	}
	return &commonpb.Header{Fields: map[string]*commonpb.Payload{traceHeader: p}}, end
}
