package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/acme/smsorch/codec"
)

// health answers the two questions an orchestrator asks: /healthz, is
// the process alive (200 while it serves at all); /readyz, should it get
// work (200 when every check passes and it is not stopping, else 503
// with the names of what failed; the reasons go to the log, not to
// whoever asks).
type health struct {
	log      *zap.Logger
	draining atomic.Bool
	mu       sync.Mutex
	checks   []healthCheck
	// The last answer, kept for a second: /readyz on the published intake
	// must not turn each request into a query of Temporal and the ledger.
	at     time.Time
	failed []string
	logged string // what was last logged as not ready, so a lasting failure logs once
}

// readyFor is how long an answer of ready is kept.
const readyFor = time.Second

type healthCheck struct {
	name string
	run  func(context.Context) error
}

// add registers a readiness check.
func (h *health) add(name string, run func(context.Context) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.checks = append(h.checks, healthCheck{name, run})
	h.at = time.Time{} // ask again with it
}

// ready runs every check (in parallel, 3 s each) and returns the names
// of those that failed; within a second of the last run it returns that
// run's answer.
func (h *health) ready(ctx context.Context) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.at.IsZero() && time.Since(h.at) < readyFor {
		return h.failed
	}
	checks := h.checks
	errs := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, c := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			errs[i] = c.run(cctx)
		}()
	}
	wg.Wait()
	var failed []string
	var fields []zap.Field
	for i, err := range errs {
		if err != nil {
			failed = append(failed, checks[i].name)
			fields = append(fields, zap.NamedError(checks[i].name, err))
		}
	}
	if now := strings.Join(failed, ", "); now != h.logged {
		if now == "" {
			h.log.Info("ready")
		} else {
			h.log.Warn("not ready", append([]zap.Field{zap.String("failing", now)}, fields...)...)
		}
		h.logged = now
	}
	h.at, h.failed = time.Now(), failed
	return failed
}

// register serves /healthz and /readyz on mux.
func (h *health) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "alive\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if h.draining.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "not ready: stopping (sends in flight finish and are recorded)\n")
			return
		}
		if failed := h.ready(r.Context()); len(failed) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, "not ready: %s (the process's log says why)\n", strings.Join(failed, ", "))
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
}

// with serves /healthz and /readyz beside next.
func (h *health) with(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	h.register(mux)
	mux.Handle("/", next)
	return mux
}

// serveHealth serves the health endpoints on their own (loopback) listener.
func (a *App) serveHealth() error {
	l, err := net.Listen("tcp", a.Config.HealthAddress)
	if err != nil {
		return fmt.Errorf("the health endpoints cannot listen on %s: %w (choose another --health address, or off)", a.Config.HealthAddress, err)
	}
	a.HealthURL = "http://" + l.Addr().String()
	mux := http.NewServeMux()
	a.health.register(mux)
	a.healthSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := a.healthSrv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.Log.Error("the health endpoints stopped", zap.Error(err))
		}
	}()
	return nil
}

// HealthCheck asks url (a /healthz or /readyz) and returns nil on a 2xx
// answer: what `worker healthcheck URL` runs inside a container whose
// image has no shell or wget.
func HealthCheck(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %q is not a URL: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("healthcheck: %s answered %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// unopenedFor is how long a worker given work it could not open (a
// payload sealed under a key its ring lacks) stays not ready: the work
// is retried, on it or on another worker, so a worker that keeps
// failing it keeps saying so. Temporal retries a failing workflow task
// at most ten minutes apart: longer than that, so it does not flap.
const unopenedFor = 15 * time.Minute

// unopenedLately is the readiness of a worker's payload keys: an error
// naming the key when, within unopenedFor of now, a run's input or an
// activity's could not be opened with them.
func unopenedLately(k *codec.Keyring, now time.Time) error {
	why, at := k.Unopened()
	if at.IsZero() || now.Sub(at) > unopenedFor {
		return nil
	}
	return fmt.Errorf("at %s a run's payload was %s: its work waits for a worker that holds the key; give this worker every key in use (%s) and restart it", at.UTC().Format(time.RFC3339), why, codec.EnvKeys)
}
