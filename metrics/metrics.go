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
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"

	"github.com/acme/smsorch/metrics/name"
)

// Exporter holds the registry and the SDK's handler that feeds it.
type Exporter struct {
	Registry *prometheus.Registry
	// SDK goes into client.Options.MetricsHandler.
	SDK      client.MetricsHandler
	provider *sdkmetric.MeterProvider
	refused  *prometheus.CounterVec
}

// New makes an exporter with its own registry.
func New() (*Exporter, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
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
	// So does every metric the alerts use (deploy/prometheus): a counter
	// that has never counted is exported as 0, not left out, so its
	// name can be checked against a scrape and rate() works on it.
	for _, c := range []struct {
		name  string
		attrs map[string]string
	}{
		{name.Duplicates, map[string]string{"kind": "proven"}},
		{name.Duplicates, map[string]string{"kind": "possible"}},
	} {
		h.WithTags(c.attrs).Counter(c.name).Inc(0)
	}
	return &Exporter{Registry: reg, SDK: h, provider: mp, refused: refused}, nil
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
