package drill

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/app"
	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/codec"
	"github.com/acme/smsorch/internal/devstack/defaults"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/internal/pgdb"
	"github.com/acme/smsorch/internal/pki"
	"github.com/acme/smsorch/internal/procs"
)

// topology is the drill's processes: one dev worker (Temporal inside),
// or the cluster: two server-only processes on PostgreSQL and two
// workers outside dev mode.
type topology struct {
	frontends []string // Temporal frontends, one per server process
	intakes   []string // one per worker process
	// temporalDB is the cluster's Temporal database ("" in dev mode).
	temporalDB string
	// certs are the cluster's mutual TLS: its servers answer only
	// clients with a certificate of its CA (nil in dev mode); tls is
	// what the drill's own clients present (the workers' certificate).
	certs   *pki.Files
	tls     *tls.Config
	mu      sync.Mutex
	servers []*procs.Proc // cluster only; nil once killed
	workers []*procs.Proc
	killed  []string
	next    atomic.Uint64 // intake rotation
}

// clusterName is the name the cluster's clients check in its servers'
// certificate.
const clusterName = "temporal.smsdrill"

// temporalEnv is how a worker or smsctl reaches the drill's Temporal.
func (d *drill) temporalEnv() []string {
	env := []string{"TEMPORAL_ADDRESS=" + strings.Join(d.frontends, ",")}
	if d.certs != nil {
		env = append(env, d.certs.Env(clusterName)...)
	}
	return env
}

// clientTLS is what the drill's own client presents: an admin's
// certificate in the cluster, nothing in dev mode.
func (d *drill) clientTLS() *tls.Config {
	if d.tls == nil {
		return nil
	}
	return d.tls.Clone()
}

// refusesStrangers checks that every server refuses a client without a
// certificate of the cluster's CA: in plain gRPC, and in TLS with none.
func (d *drill) refusesStrangers(ctx context.Context) error {
	noCert := d.clientTLS()
	noCert.Certificates = nil
	for _, f := range d.frontends {
		for what, conf := range map[string]*tls.Config{"in plain gRPC": nil, "in TLS without a certificate": noCert} {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			c, err := client.DialContext(cctx, client.Options{HostPort: f, Logger: logging.SDK(zap.NewNop()), ConnectionOptions: client.ConnectionOptions{TLS: conf}})
			if err == nil {
				_, err = c.WorkflowService().CountWorkflowExecutions(cctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: client.DefaultNamespace})
				c.Close()
			}
			cancel()
			if err == nil {
				return fmt.Errorf("drill: the Temporal server at %s answered a client %s", f, what)
			}
		}
	}
	// The workers' certificate (worker, intake) may not terminate: that
	// takes the admin's.
	conf, err := d.certs.ClientTLS(clusterName)
	if err != nil {
		return err
	}
	for _, f := range d.frontends {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c, err := client.DialContext(cctx, client.Options{HostPort: f, Logger: logging.SDK(zap.NewNop()), ConnectionOptions: client.ConnectionOptions{TLS: conf}})
		if err == nil {
			_, err = c.WorkflowService().TerminateWorkflowExecution(cctx, &workflowservice.TerminateWorkflowExecutionRequest{
				Namespace: client.DefaultNamespace, WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: "smsdrill-no-such-run"}})
			c.Close()
		}
		cancel()
		var denied *serviceerror.PermissionDenied
		if !errors.As(err, &denied) {
			return fmt.Errorf("drill: the Temporal server at %s let the workers' certificate terminate a run (want a refusal, got %v)", f, err)
		}
	}
	d.logf("each server refused a client without a certificate of the cluster's CA (plain gRPC, and TLS without one), and the workers' certificate a terminate")
	return nil
}

func (d *drill) describe() string {
	if d.cfg.Cluster {
		return "2 Temporal servers (one cluster on PostgreSQL, mutual TLS) + 2 workers (PostgreSQL ledger) + simulator"
	}
	return "1 dev worker (Temporal on SQLite inside) + simulator"
}

// databases are the PostgreSQL databases the drill made.
func (d *drill) databases() []string {
	var out []string
	if d.cfg.Postgres != "" {
		out = append(out, d.ledger)
	}
	if d.temporalDB != "" {
		out = append(out, d.temporalDB, pgdb.WithSuffix(d.temporalDB, defaults.VisibilitySuffix))
	}
	return out
}

// startProcesses starts the Temporal side and the workers.
func (d *drill) startProcesses(ctx context.Context) error {
	n := 1
	if d.cfg.Cluster {
		n = 2
		if d.cfg.Postgres == "" {
			return errors.New("drill: the cluster drill needs a PostgreSQL server (-postgres)")
		}
		var err error
		if d.temporalDB, err = pgdb.Name(d.cfg.Postgres, fmt.Sprintf("smsdrill_%d", d.cfg.Seed), "temporal"); err != nil {
			return err
		}
		// The drill itself resets runs and decides, as an admin does;
		// the workers (each serving an intake) and smsctl's reads get the
		// certificate compose gives the intake: worker and intake.
		admin, err := pki.Generate(filepath.Join(d.cfg.Dir, "pki"), []string{clusterName}, nil, "drill", pki.RoleAdmin)
		if err != nil {
			return fmt.Errorf("drill: make the cluster's certificates: %w", err)
		}
		if d.tls, err = admin.ClientTLS(clusterName); err != nil {
			return fmt.Errorf("drill: the cluster's certificates: %w", err)
		}
		certs, err := admin.Issue("worker", pki.RoleWorker, pki.RoleIntake)
		if err != nil {
			return fmt.Errorf("drill: make the workers' certificate: %w", err)
		}
		d.certs = &certs
	}
	for i := 0; i < n; i++ {
		f, err := procs.FreeAddr()
		if err != nil {
			return err
		}
		in, err := procs.FreeAddr()
		if err != nil {
			return err
		}
		d.frontends, d.intakes = append(d.frontends, f), append(d.intakes, in)
	}
	d.workers = make([]*procs.Proc, n)
	if d.cfg.Cluster {
		d.servers = make([]*procs.Proc, n)
		// One after the other: the first creates the schema and the
		// namespace, the second joins it.
		for i := range d.servers {
			if err := d.startServer(ctx, i); err != nil {
				return err
			}
		}
		d.logf("Temporal cluster up with mutual TLS: servers at %s on %s", strings.Join(d.frontends, ", "), logging.RedactDSN(d.temporalDB))
		if err := d.refusesStrangers(ctx); err != nil {
			return err
		}
	}
	for i := range d.workers {
		if err := d.startWorker(ctx, i); err != nil {
			return err
		}
	}
	return nil
}

func (d *drill) startServer(ctx context.Context, i int) error {
	name := fmt.Sprintf("server-%d", i+1)
	// The database through the environment, as a password would be.
	p, err := procs.Start(name, d.cfg.Bins.Server, []string{
		"--server-only", "--frontend", d.frontends[i], "--ui", "off", "--log-format", "json",
		"--temporal-tls-cert", d.certs.ServerCert, "--temporal-tls-key", d.certs.ServerKey, "--temporal-tls-ca", d.certs.CA,
	}, []string{app.EnvTemporalDB + "=" + d.temporalDB}, filepath.Join(d.cfg.Dir, name+".log"))
	if err != nil {
		return err
	}
	if err := procs.WaitTemporal(ctx, p, d.frontends[i], d.clientTLS(), 3*time.Minute); err != nil {
		p.Kill()
		return fmt.Errorf("drill: %s did not come up (see %s): %w", name, filepath.Join(d.cfg.Dir, name+".log"), err)
	}
	d.mu.Lock()
	d.servers[i] = p
	d.mu.Unlock()
	return nil
}

func (d *drill) workerArgs(i int) []string {
	w := d.cfg.Window
	margin := w / 4
	args := []string{
		"--ledger", d.ledger, "--intake", d.intakes[i], "--log-format", "json",
		"--bird-url", d.simURL, "--bird-workspace", simulator.DevWorkspace, "--bird-channel", simulator.DevChannel,
		"--sendy-url", d.simURL,
		"--attempt-timeout", attemptTimeout.String(),
		"--bird-replay-window", w.String(), "--sendy-replay-window", w.String(), "--window-margin", margin.String(),
		"--late-effect-horizon", d.lateEffectHorizon().String(),
		"--reconcile-retry", "10s", "--status-poll", "1s", "--tracking-limit", "3m", "--decision-deadline", "30m",
	}
	if d.cfg.SendyBurst == 0 {
		// The simulator has no Sendy limit then, and neither has the
		// fleet; with a burst, the workers keep their default limit.
		args = append(args, "--sendy-rate-limit", "0")
	}
	if d.cfg.Cluster {
		// A production worker: Temporal elsewhere, the intake on loopback unsigned.
		return append(args, "--intake-insecure")
	}
	return append(args, "--dev", "--data-dir", filepath.Join(d.cfg.Dir, "state"), "--frontend", d.frontends[0], "--ui", "off", "--simulator", "off")
}

// lateEffectHorizon is the longest a hung attempt can still take effect:
// the hang (which outlives the simulator's short lock) plus the attempt
// timeout, with margin; and never less than the worker accepts, Bird's
// real lock lifetime plus the attempt timeout, which the drill's short
// hang and lock would otherwise go below.
func (d *drill) lateEffectHorizon() time.Duration {
	return max(d.cfg.Hang+attemptTimeout+4*time.Second, activities.ProviderLockLifetime+attemptTimeout)
}

func (d *drill) startWorker(ctx context.Context, i int) error {
	name := fmt.Sprintf("worker-%d", i+1)
	env := append(d.creds.Env(), codec.EnvKeys+"="+d.keySpec)
	if d.cfg.Cluster {
		env = append(env, d.temporalEnv()...)
		env = append(env, "TEMPORAL_NAMESPACE="+client.DefaultNamespace)
	}
	log := filepath.Join(d.cfg.Dir, name+".log")
	bin := d.cfg.Bins.Worker
	if !d.cfg.Cluster {
		bin = d.cfg.Bins.Server // --dev: Temporal inside
	}
	p, err := procs.Start(name, bin, d.workerArgs(i), env, log)
	if err != nil {
		return err
	}
	if err := procs.WaitHTTP(ctx, p, "http://"+d.intakes[i]+"/healthz", 3*time.Minute); err != nil {
		p.Kill()
		return fmt.Errorf("drill: %s did not come up (see %s): %w", name, log, err)
	}
	d.mu.Lock()
	d.workers[i] = p
	d.mu.Unlock()
	return nil
}

// killAndRestart performs the next kill. One dev process: SIGKILL of
// the worker (Temporal, intake and all), restarted on the same state.
// Cluster: first the second server, for good; then a worker in turn,
// restarted.
func (d *drill) killAndRestart(ctx context.Context) error {
	d.mu.Lock()
	k := len(d.killed) + 1
	d.mu.Unlock()
	if d.cfg.Cluster && k == 1 {
		d.mu.Lock()
		p := d.servers[1]
		d.servers[1] = nil
		d.killed = append(d.killed, p.Name)
		d.mu.Unlock()
		p.Kill()
		d.logf("kill %d: SIGKILL of %s (pid %d), not restarted: its shards move to server-1", k, p.Name, p.Cmd.Process.Pid)
		return nil
	}
	i := 0
	if d.cfg.Cluster {
		i = k % 2 // worker-1, worker-2, worker-1, …
	}
	d.mu.Lock()
	p := d.workers[i]
	d.workers[i] = nil
	d.killed = append(d.killed, p.Name)
	d.mu.Unlock()
	p.Kill()
	d.logf("kill %d: SIGKILL of %s (pid %d); restarting it", k, p.Name, p.Cmd.Process.Pid)
	return d.startWorker(ctx, i)
}

// nextIntake rotates over the workers' intakes, so a post retried after
// a worker died goes to another.
func (d *drill) nextIntake() string {
	return d.intakes[int(d.next.Add(1)%uint64(len(d.intakes)))]
}

// stopWorkers stops every worker (SIGTERM, then SIGKILL after 30 s).
func (d *drill) stopWorkers() { procs.StopEach(procs.Take(&d.mu, d.workers)) }

// stopAll stops the workers, then the servers.
func (d *drill) stopAll() {
	d.stopWorkers()
	procs.StopEach(procs.Take(&d.mu, d.servers))
}
