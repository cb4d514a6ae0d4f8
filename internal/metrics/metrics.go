// Package metrics exports the process's metrics for Prometheus: the
// Temporal SDK's own (workflow and activity tasks, latencies, polls) and
// the orchestrator's, which workflow and activity code emit through the
// SDK's metrics handler (so a workflow replaying its history does not
// count again). The SDK's OpenTelemetry contrib feeds an OpenTelemetry
// meter whose Prometheus exporter serves /metrics.
package metrics

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"

	"github.com/acme/smsorch/internal/metrics/name"
	"github.com/acme/smsorch/provider"
)

// Exporter holds the registry and the SDK's handler that feeds it.
type Exporter struct {
	Registry *prometheus.Registry
	// SDK goes into client.Options.MetricsHandler.
	SDK      client.MetricsHandler
	provider *sdkmetric.MeterProvider
	refused  *prometheus.CounterVec
	limits   *prometheus.GaugeVec
}

// New makes an exporter with its own registry.
func New() (*Exporter, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithView(views()...))
	h := temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter:                mp.Meter("smsorch"),
		UseMonotonicCounters: true,           // Prometheus counters (_total), not gauges
		OnError:              func(error) {}, // a metric that cannot be recorded must not stop a send
	})
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: name.IntakeRefused + "_total", Help: "Error answers of the HTTP intake, by code.",
	}, []string{"code"})
	reg.MustRegister(refused)
	// The codes an alert watches exist from the start, at 0, so a rate
	// over them is defined before the first refusal.
	for _, code := range []string{"unauthorized", "stale"} {
		refused.WithLabelValues(code)
	}
	// So does every rare counter the alerts and the dashboard use
	// (deploy/): one that has never counted is exported as 0, not left
	// out, so its name can be checked against a scrape and rate() works
	// on it from the start. With only their own labels kept (views),
	// these are the very series the first count then adds to.
	for _, pn := range provider.Names {
		p := string(pn)
		h.WithTags(map[string]string{"provider": p}).Counter(name.Replays).Inc(0)
		h.WithTags(map[string]string{"provider": p}).Counter(name.Conflicts).Inc(0)
		for _, kind := range []string{"proven", "possible"} {
			h.WithTags(map[string]string{"provider": p, "kind": kind}).Counter(name.Duplicates).Inc(0)
		}
	}
	limits := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: name.RequestLimit, Help: "The fleet's request limit at each provider, in requests a minute, as this worker is configured.",
	}, []string{"provider"})
	reg.MustRegister(limits)
	return &Exporter{Registry: reg, SDK: h, provider: mp, refused: refused, limits: limits}, nil
}

// RequestLimit exports the fleet's request limit at a provider; 0 (no
// limit) exports nothing.
func (e *Exporter) RequestLimit(provider string, perMinute int) {
	if perMinute > 0 {
		e.limits.WithLabelValues(provider).Set(float64(perMinute))
	}
}

// ownLabels are the labels each of our metrics keeps. The SDK's handler
// adds the namespace, task queue, workflow and activity types to what
// workflow and activity code emit; kept, they would make every first
// count a new series born at 1, which increase() does not count, beside
// the one exported at 0.
var ownLabels = map[string][]string{
	name.Sends:           {"provider", "outcome"},
	name.Replays:         {"provider"},
	name.Conflicts:       {"provider"},
	name.Reconciliations: {"provider", "result"},
	name.Decisions:       {"action", "forced"},
	name.Duplicates:      {"provider", "kind"},
	name.Failovers:       {"from", "to", "reason"},
	name.Settled:         {"provider", "state"},
	name.AcceptLatency:   {"provider"},
}

// views keep our metrics to their own labels, and give the latency
// histograms buckets in seconds (the default's suit milliseconds: every
// healthy latency would fall in its first bucket, 0 to 5).
func views() []sdkmetric.View {
	var vs []sdkmetric.View
	for metric, keys := range ownLabels {
		stream := sdkmetric.Stream{AttributeFilter: attribute.NewAllowKeysFilter(attributeKeys(keys)...)}
		if metric == name.AcceptLatency {
			// A one-time code is due within seconds; a run may take hours.
			stream.Aggregation = sdkmetric.AggregationExplicitBucketHistogram{Boundaries: []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900, 3600}}
		}
		vs = append(vs, sdkmetric.NewView(sdkmetric.Instrument{Name: metric}, stream))
	}
	// The SDK's latencies (schedule-to-start, execution, requests).
	return append(vs, sdkmetric.NewView(sdkmetric.Instrument{Name: "temporal_*", Kind: sdkmetric.InstrumentKindHistogram}, sdkmetric.Stream{
		Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}},
	}))
}

func attributeKeys(names []string) []attribute.Key {
	keys := make([]attribute.Key, len(names))
	for i, n := range names {
		keys[i] = attribute.Key(n)
	}
	return keys
}

// IntakeRefused counts an error answer of the intake.
func (e *Exporter) IntakeRefused(code string) { e.refused.WithLabelValues(code).Inc() }

// WatchAwaiting adds the Awaiting gauge, counted by count at each scrape
// (bounded to 3 s; -1 when the count fails).
func (e *Exporter) WatchAwaiting(count func(context.Context) (int64, error)) {
	e.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: name.Awaiting, Help: "Runs awaiting a resend or cancel decision (Temporal visibility, all workers).",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		n, err := count(ctx)
		if err != nil {
			return -1
		}
		return float64(n)
	}))
}

// Handler serves the registry in Prometheus' text format.
func (e *Exporter) Handler() http.Handler {
	return promhttp.HandlerFor(e.Registry, promhttp.HandlerOpts{})
}

// Close flushes and stops the meter provider.
func (e *Exporter) Close() error {
	return e.provider.Shutdown(context.Background())
}
