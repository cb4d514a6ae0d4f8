package app

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/codec"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/intake"
	"github.com/acme/smsorch/internal/clientopts"
	"github.com/acme/smsorch/internal/devmode"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/internal/metrics"
	"github.com/acme/smsorch/internal/pki"
	"github.com/acme/smsorch/internal/tracing"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/provider/bird"
	"github.com/acme/smsorch/provider/pace"
	"github.com/acme/smsorch/provider/sendy"
	"github.com/acme/smsorch/starter"
	"github.com/acme/smsorch/workflows"
)

// App is a running worker process.
type App struct {
	Config Config
	Log    *zap.Logger
	// Client is connected to the namespace the worker serves.
	Client client.Client
	// Stack is the embedded Temporal server and web UI (dev and
	// server-only modes), or the web UI alone (ui-only mode).
	Stack Embedded
	// Sim is the provider simulator (dev mode with the simulator only).
	Sim    *simulator.Listening
	Ledger ledger.Ledger
	// Activities are what the worker registered.
	Activities *activities.Activities
	// Namespace is the namespace the worker serves.
	Namespace string
	// IntakeURL is the HTTP intake's base URL ("" when off).
	IntakeURL string
	// CodecURL is the codec server's base URL ("" when off).
	CodecURL string
	// MetricsURL is the Prometheus endpoint ("" when off).
	MetricsURL string
	// HealthURL serves /healthz and /readyz ("" when off; the intake and
	// the codec server serve them too).
	HealthURL string

	workers    *Workers
	stopPurge  func()
	purgeDone  chan struct{}
	intake     *http.Server
	codec      *http.Server
	uiURL      atomic.Value // the embedded UI's URL, for the codec server's CORS
	client     atomic.Value // Client, for the metrics endpoint
	metrics    *metrics.Exporter
	metricsSrv *http.Server
	health     *health
	healthSrv  *http.Server
	started    atomic.Bool
	stopped    bool
}

// Start brings the process up; on error everything started is stopped.
// Its steps: the listeners that report on the process, the connection to
// Temporal (through the embedded stack in dev, server-only and ui-only
// modes), the send ledger, and the workers with the intake beside them.
func Start(ctx context.Context, cfg Config, log *zap.Logger) (_ *App, err error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	a := &App{Config: cfg, Log: log, health: &health{log: log.Named("health")}}
	defer func() {
		if err != nil {
			_ = a.Stop()
		}
	}()
	a.health.add("started", func(context.Context) error {
		if !a.started.Load() {
			return errors.New("the process is still starting")
		}
		return nil
	})
	if err := a.serveReports(); err != nil {
		return nil, err
	}
	if err := a.connect(ctx); err != nil {
		return nil, err
	}
	// A server-only or ui-only process has nothing more to start.
	if !cfg.ServerOnly && !cfg.UIOnly {
		if err := a.openLedger(ctx); err != nil {
			return nil, err
		}
		if err := a.startWork(); err != nil {
			return nil, err
		}
	}
	a.started.Store(true)
	return a, nil
}

// serveReports starts the listeners that report on the process: health,
// metrics, and the codec server (first, so the embedded UI can be wired
// to it).
func (a *App) serveReports() error {
	if a.Config.HealthAddress != Off {
		if err := a.serveHealth(); err != nil {
			return err
		}
	}
	if a.Config.MetricsAddress != Off {
		if err := a.serveMetrics(); err != nil {
			return err
		}
	}
	if a.Config.CodecServerAddress != Off {
		return a.serveCodec()
	}
	return nil
}

// connect starts the embedded stack where the mode has one and connects
// the client to Temporal; outside the embedded stack it registers the
// search attributes, without which every state change would fail the
// run's task. Readiness asks the frontend (and the embedded UI of a
// server-only or ui-only process).
func (a *App) connect(ctx context.Context) error {
	cfg := a.Config
	embedded := cfg.Dev || cfg.ServerOnly || cfg.UIOnly
	settings := clientopts.Settings{Env: cfg.temporalEnvironment()}
	if embedded {
		var err error
		if a.Stack, err = startEmbedded(ctx, cfg, a.Log, a.uiCodecEndpoint()); err != nil {
			return err
		}
		a.Namespace = a.Stack.Namespace()
		a.uiURL.Store(a.Stack.UIURL())
		settings = clientopts.Settings{Address: a.Stack.FrontendAddress(), Namespace: a.Namespace, TLS: a.Stack.ClientTLS()}
		if cfg.UIOnly {
			settings = clientopts.Settings{Env: cfg.temporalEnvironment(), Address: cfg.UIFrontend, Namespace: a.Namespace}
		}
	}
	err := a.dial(ctx, settings)
	if err == nil && !embedded {
		err = contract.RegisterSearchAttributes(ctx, a.Client, a.Namespace)
	}
	if err != nil {
		return fmt.Errorf("connect to Temporal: %w", err)
	}
	a.client.Store(a.Client)
	a.health.add("temporal", a.temporalReachable)
	if cfg.ServerOnly || cfg.UIOnly {
		if u := a.Stack.UIURL(); u != "" {
			a.health.add("web UI", func(ctx context.Context) error { return HealthCheck(ctx, u+"/") })
		}
	}
	return nil
}

// openLedger opens the send ledger, where the recipients and texts are
// sealed with the payload keys and removed after the retention (a purge
// in the background), and says what protects the payloads.
func (a *App) openLedger(ctx context.Context) error {
	cfg, log := a.Config, a.Log
	var err error
	if a.Ledger, err = ledger.Open(ctx, cfg.LedgerPath, ledger.WithKeys(cfg.Codec)); err != nil {
		return err
	}
	purgeCtx, stopPurge := context.WithCancel(context.WithoutCancel(ctx))
	a.stopPurge = stopPurge
	retention := a.ledgerRetention(ctx)
	a.purgeDone = make(chan struct{})
	go func() {
		defer close(a.purgeDone)
		a.purgeLedger(purgeCtx, retention)
	}()
	a.health.add("ledger", func(ctx context.Context) error {
		_, err := a.Ledger.Now(ctx) // a query of the ledger's own clock
		return err
	})
	log.Info("send ledger", zap.String("ledger", a.Ledger.Describe()), zap.String("identity", a.Ledger.Identity()))
	if cfg.Codec != nil {
		if cfg.IntakeAddress == Off {
			// Not on an intake: a run no worker can open (a key no one
			// holds) would take every intake out of its load balancer.
			a.health.add("payload keys", func(context.Context) error {
				return unopenedLately(cfg.Codec, time.Now())
			})
		}
		log.Info("payloads are encrypted before they reach Temporal", zap.Stringer("codec", cfg.Codec))
		if id := cfg.Codec.Example(); id != "" { // refused outside dev mode
			log.Warn("key " + id + " is a published example, which anyone can read: make your own with `smsctl codec-key` and put it first in " + codec.EnvKeys)
		}
	} else if !cfg.Dev {
		log.Warn("payloads reach Temporal in plain text (--plaintext-payloads): recipients and texts stand in its history")
	}
	if _, sqlite := a.Ledger.(*ledger.SQLite); sqlite && !cfg.Dev {
		log.Warn("the SQLite ledger serves one host only: every worker that runs this task queue must use the same ledger, or its activities refuse the events another ledger claimed; give a fleet --ledger postgres://… (or " + EnvLedger + ")")
	}
	return nil
}

// startWork starts the workers, with the providers' clients, and the
// HTTP intake beside them.
func (a *App) startWork() error {
	cfg := a.Config
	providers, err := a.providers()
	if err != nil {
		return err
	}
	a.Activities = &activities.Activities{Providers: providers, Policies: pacedLookups(cfg.Policies, cfg.RateLimits), Ledger: a.Ledger, Logger: a.Log.Named("activities")}
	tuning := cfg.Tuning()
	if err := tuning.Apply(); err != nil {
		return err
	}
	if a.workers, err = StartWorkers(a.Client, contract.TaskQueue, a.Activities, cfg.queueLimits(), tuning); err != nil {
		return err
	}
	if cfg.IntakeAddress != Off {
		return a.serveIntake()
	}
	return nil
}

// temporalReachable asks the frontend's health service.
func (a *App) temporalReachable(ctx context.Context) error {
	_, err := a.Client.CheckHealth(ctx, &client.CheckHealthRequest{})
	return err
}

// serveIntake serves the HTTP event intake next to the worker.
func (a *App) serveIntake() error {
	l, err := net.Listen("tcp", a.Config.IntakeAddress)
	if err != nil {
		return fmt.Errorf("the HTTP intake cannot listen on %s: %w (choose another --intake address, or --intake off)", a.Config.IntakeAddress, err)
	}
	cfg := intake.Config{Secrets: []logging.Secret{a.Config.IntakeSecret, a.Config.IntakePreviousSecret}, Senders: a.Config.IntakeSenders, Proxies: a.Config.IntakeProxies, RatePerMinute: a.Config.IntakeClientRate, Logger: a.Log.Named("intake")}
	if a.metrics != nil {
		cfg.Refused = a.metrics.IntakeRefused
	}
	h := intake.New(starter.New(a.Client, starter.WithNamespace(a.Namespace)), cfg)
	a.intake = intake.NewServer(a.health.with(h))
	a.IntakeURL = "http://" + l.Addr().String()
	serve := func() error { return a.intake.Serve(l) }
	if a.Config.IntakeTLSCert != "" {
		// Read again when renewed in place: new connections get the new
		// certificate without a restart.
		r, err := pki.NewReloader(a.Config.IntakeTLSCert, a.Config.IntakeTLSKey)
		if err != nil {
			_ = l.Close()
			return fmt.Errorf("the HTTP intake's TLS: %w", err)
		}
		a.intake.TLSConfig = &tls.Config{GetCertificate: r.GetCertificate, MinVersion: tls.VersionTLS12}
		a.IntakeURL = "https://" + l.Addr().String()
		serve = func() error { return a.intake.ServeTLS(l, "", "") }
	}
	go func() {
		if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.Log.Error("the HTTP intake stopped", zap.Error(err))
		}
	}()
	return nil
}

// serveMetrics serves Prometheus metrics: the SDK's, ours, and the
// runs awaiting a decision counted in Temporal at each scrape.
func (a *App) serveMetrics() error {
	exp, err := metrics.New()
	if err != nil {
		return err
	}
	a.metrics = exp
	for p, perMinute := range a.Config.RateLimits {
		exp.RequestLimit(string(p), perMinute)
	}
	exp.WatchAwaiting(func(ctx context.Context) (int64, error) {
		c, _ := a.client.Load().(client.Client)
		if c == nil {
			return 0, errors.New("not connected yet")
		}
		resp, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: a.Namespace, Query: awaitingQuery})
		return resp.GetCount(), err
	})
	l, err := net.Listen("tcp", a.Config.MetricsAddress)
	if err != nil {
		return fmt.Errorf("the metrics endpoint cannot listen on %s: %w (choose another --metrics address, or off)", a.Config.MetricsAddress, err)
	}
	a.MetricsURL = "http://" + l.Addr().String() + "/metrics"
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", exp.Handler())
	a.metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := a.metricsSrv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.Log.Error("the metrics endpoint stopped", zap.Error(err))
		}
	}()
	return nil
}

var awaitingQuery = fmt.Sprintf(`ExecutionStatus = "Running" AND %s = %q`, contract.StateAttribute.GetName(), string(contract.AwaitingDecision))

// dial connects the process's client through s, with the process's
// logger, payload codec and metrics.
func (a *App) dial(ctx context.Context, s clientopts.Settings) error {
	s.Logger, s.Codec = a.Log.Named("temporal-sdk"), a.Config.Codec
	// Outside dev mode a run or a decision that did not come sealed by a
	// key of ours (a plain `temporal workflow start`) does nothing.
	s.RefuseUnsealed = !a.Config.Dev && !a.Config.AcceptUnsealed
	if a.metrics != nil {
		s.Metrics = a.metrics.SDK
	}
	opts, err := clientopts.Build(s)
	if err != nil {
		return err
	}
	a.Namespace = opts.Namespace
	a.Client, err = client.DialContext(ctx, opts)
	return err
}

// uiCodecEndpoint is the codec endpoint the embedded UI is given. In dev
// mode the UI listens for the person who started it, and is given the
// token in the path; a --server-only UI gets the endpoint without it:
// each person who may read payloads adds the token in the UI's codec
// settings (http://HOST:PORT/TOKEN).
func (a *App) uiCodecEndpoint() string {
	if a.Config.UICodecEndpoint != "" {
		return a.Config.UICodecEndpoint
	}
	if a.CodecURL == "" {
		return ""
	}
	if host, _, err := net.SplitHostPort(a.Config.UIAddress); a.Config.Dev && err == nil && loopback(host) {
		return a.CodecURL + "/" + a.Config.CodecToken.Reveal()
	}
	return a.CodecURL
}

// serveCodec serves the codec server for the web UI.
func (a *App) serveCodec() error {
	l, err := net.Listen("tcp", a.Config.CodecServerAddress)
	if err != nil {
		return fmt.Errorf("the codec server cannot listen on %s: %w (choose another --codec-server address, or off)", a.Config.CodecServerAddress, err)
	}
	a.CodecURL = "http://" + l.Addr().String()
	// The embedded UI's origin, known once the stack listens.
	uiOrigin := func(origin string) bool {
		if slices.Contains(a.Config.CodecUIOrigins, origin) {
			return true
		}
		u, _ := a.uiURL.Load().(string)
		return u != "" && (origin == u || origin == strings.Replace(u, "127.0.0.1", "localhost", 1))
	}
	a.codec = &http.Server{Handler: a.health.with(codec.Handler(a.Config.Codec, a.Config.CodecToken, uiOrigin)), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := a.codec.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.Log.Error("the codec server stopped", zap.Error(err))
		}
	}()
	return nil
}

// Register registers the workflow and the activities on a worker.
func Register(w worker.Registry, acts *activities.Activities) {
	w.RegisterWorkflowWithOptions(workflows.SendSMS, workflow.RegisterOptions{Name: contract.WorkflowName})
	w.RegisterActivity(acts)
}

// providers builds the clients: the simulator in dev mode, the configured
// providers otherwise.
func (a *App) providers() (map[provider.Name]provider.Client, error) {
	cfg := a.Config
	birdCfg := bird.Config{BaseURL: cfg.Bird.BaseURL, AccessKey: cfg.Bird.AccessKey, WorkspaceID: cfg.Bird.WorkspaceID, ChannelID: cfg.Bird.ChannelID, Timeout: cfg.AttemptTimeout}
	sendyCfg := sendy.Config{BaseURL: cfg.Sendy.BaseURL, Token: cfg.Sendy.Token, Sender: cfg.Sendy.Sender, Timeout: cfg.AttemptTimeout}
	if cfg.simulated() {
		var simCfg simulator.Config
		var err error
		if a.Sim, simCfg, err = devmode.StartSimulator(cfg.Simulator, cfg.SimFaults, cfg.SimulatorAddress, a.Log.Named("simulator")); err != nil {
			return nil, err
		}
		birdCfg = devmode.BirdConfig(a.Sim.URL, simCfg.BirdAccessKey, cfg.AttemptTimeout)
		sendyCfg = devmode.SendyConfig(a.Sim.URL, simCfg.SendyToken, cfg.Sendy.Sender, cfg.AttemptTimeout)
	}
	// A provider with a limit gets the fleet's pacer: every request of
	// every worker takes a slot in the ledger they share.
	var err error
	if birdCfg.Pacer, err = pace.ForLimit(a.Ledger, provider.Bird, cfg.RateLimits[provider.Bird]); err != nil {
		return nil, err
	}
	if sendyCfg.Pacer, err = pace.ForLimit(a.Ledger, provider.Sendy, cfg.RateLimits[provider.Sendy]); err != nil {
		return nil, err
	}
	out := map[provider.Name]provider.Client{}
	if birdCfg.BaseURL != "" {
		c, err := bird.New(birdCfg)
		if err != nil {
			return nil, err
		}
		out[provider.Bird] = c
	}
	if sendyCfg.BaseURL != "" {
		c, err := sendy.New(sendyCfg)
		if err != nil {
			return nil, err
		}
		out[provider.Sendy] = c
	}
	return out, nil
}

// Banner says what is running and where, for the person who started it.
func (a *App) Banner() string {
	var b strings.Builder
	if a.Stack != nil {
		switch {
		case a.Config.ServerOnly:
			b.WriteString("smsorch Temporal server is up (no worker in this process)\n")
		case a.Config.UIOnly:
			b.WriteString("smsorch web UI is up (no worker in this process)\n")
		default:
			b.WriteString("smsorch dev stack is up\n")
		}
		if u := a.Stack.UIURL(); u != "" {
			fmt.Fprintf(&b, "  Temporal web UI:    %s/namespaces/%s/workflows\n", u, a.Namespace)
		}
		tls := ""
		if a.Stack.ClientTLS() != nil {
			tls = ", mutual TLS"
		}
		fmt.Fprintf(&b, "  Temporal frontend:  %s (namespace %s%s)\n", a.Stack.FrontendAddress(), a.Namespace, tls)
		fmt.Fprintf(&b, "  Temporal state:     %s\n", a.Stack.State())
	} else {
		fmt.Fprintf(&b, "smsorch worker is up (namespace %s)\n", a.Namespace)
	}
	if a.Sim != nil {
		fmt.Fprintf(&b, "  Provider simulator: %s (messages it sent: %s/_sim/messages)\n", a.Sim.URL, a.Sim.URL)
	}
	if a.CodecURL != "" {
		fmt.Fprintf(&b, "  Codec server:       %s (keys %s; the web UI decodes with the codec endpoint %s/<%s>)\n", a.CodecURL, strings.Join(a.Config.Codec.IDs(), ", "), a.CodecURL, codec.EnvToken)
	} else if a.Config.Codec != nil {
		fmt.Fprintf(&b, "  Payloads:           encrypted (keys %s)\n", strings.Join(a.Config.Codec.IDs(), ", "))
	}
	if a.MetricsURL != "" {
		fmt.Fprintf(&b, "  Metrics:            %s\n", a.MetricsURL)
	}
	if a.HealthURL != "" {
		fmt.Fprintf(&b, "  Health:             %s/healthz, %s/readyz\n", a.HealthURL, a.HealthURL)
	}
	if a.IntakeURL != "" {
		signed := "unsigned requests accepted"
		if a.Config.intakeSigned() {
			signed = "requests must be signed"
		}
		fmt.Fprintf(&b, "  HTTP intake:        POST %s/v1/events (%s)\n", a.IntakeURL, signed)
	}
	if a.Ledger != nil {
		fmt.Fprintf(&b, "  Send ledger:        %s (identity %s)\n", a.Ledger.Describe(), a.Ledger.Identity())
		queues := []string{contract.TaskQueue}
		for _, p := range provider.Names {
			if _, ok := a.Activities.Providers[p]; ok {
				queues = append(queues, contract.ProviderQueue(contract.TaskQueue, string(p)))
			}
		}
		fmt.Fprintf(&b, "  Task queues:        %s\n", strings.Join(queues, ", "))
		for _, p := range provider.Names {
			if _, ok := a.Activities.Providers[p]; ok && a.Config.RateLimits[p] > 0 {
				fmt.Fprintf(&b, "  %-19s %d requests a minute for the whole fleet\n", string(p)+" limit:", a.Config.RateLimits[p])
			}
		}
	}
	b.WriteString("Press Ctrl+C to stop.\n")
	return b.String()
}

// Stop shuts everything down in reverse order. It is safe to call twice.
func (a *App) Stop() error {
	if a.stopped {
		return nil
	}
	a.stopped = true
	a.health.draining.Store(true)
	var errs []error
	// The intake stops accepting while the workers stop taking tasks: in
	// parallel, so the whole stop stays within StopTimeout (compose's
	// grace is longer).
	intakeDone := make(chan error, 1)
	go func() {
		if a.intake == nil {
			intakeDone <- nil
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		intakeDone <- a.intake.Shutdown(ctx)
	}()
	if a.workers != nil {
		// No new tasks; sends in flight finish and are recorded (up to
		// StopTimeout) while the ledger, the client and the simulator are
		// still there.
		a.Log.Info("stopping: waiting for activities in flight", zap.Duration("up-to", a.Config.StopTimeout))
		a.workers.Stop()
	}
	errs = append(errs, <-intakeDone)
	if a.codec != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, a.codec.Shutdown(ctx))
		cancel()
	}
	if a.metricsSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, a.metricsSrv.Shutdown(ctx))
		cancel()
		errs = append(errs, a.metrics.Close())
	}
	if a.Client != nil {
		a.Client.Close()
	}
	if a.Sim != nil {
		errs = append(errs, a.Sim.Close())
	}
	if a.stopPurge != nil {
		a.stopPurge()
		<-a.purgeDone
	}
	if a.Ledger != nil {
		errs = append(errs, a.Ledger.Close())
	}
	if a.Stack != nil {
		errs = append(errs, a.Stack.Stop())
	}
	if a.healthSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, a.healthSrv.Shutdown(ctx))
		cancel()
	}
	return errors.Join(errs...)
}

// Run starts the process, prints the banner to out, and stops cleanly when
// ctx ends (SIGINT or SIGTERM in the command).
func Run(ctx context.Context, cfg Config, out io.Writer) error {
	cfg = cfg.WithDefaults()
	log, err := logging.New(logging.Options{Format: logging.Format(cfg.LogFormat), Level: cfg.LogLevel})
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	// Traces go where the standard OTEL_* variables say, or nowhere.
	where, stopTracing, err := tracing.Setup(ctx, "smsorch-worker", log.Named("tracing"))
	if err != nil {
		return err
	}
	defer func() {
		if err := stopTracing(); err != nil {
			log.Warn("tracing: the last spans could not be exported", zap.Error(err))
		}
	}()
	if where != "" {
		log.Info("traces are exported", zap.String("to", where))
	}
	a, err := Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	_, _ = io.WriteString(out, a.Banner())
	<-ctx.Done()
	log.Info("stopping")
	return a.Stop()
}

// Main is the worker: `worker healthcheck URL` asks a health endpoint
// (a container's check: the image has no shell), anything else is flags
// for Run, until ctx ends. It returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 2 && args[0] == "healthcheck" {
		if err := HealthCheck(ctx, args[1]); err != nil {
			fmt.Fprintln(stderr, "worker:", err)
			return 1
		}
		return 0
	}
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	cfg.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := Run(ctx, cfg, stdout); err != nil {
		fmt.Fprintln(stderr, "worker:", err)
		return 1
	}
	return 0
}

// StopOnSignal returns a context that ends at the first SIGINT or
// SIGTERM: the process then stops gracefully (sends in flight finish and
// are recorded, up to --stop-timeout). A second signal calls exit(1) at
// once. stop releases the signals.
func StopOnSignal(stderr io.Writer, exit func(int)) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
		case <-done:
			return
		}
		fmt.Fprintln(stderr, "worker: stopping: sends in flight finish and are recorded; a second signal exits at once")
		cancel()
		select {
		case <-sigs:
			fmt.Fprintln(stderr, "worker: second signal: exiting now")
			exit(1)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}
