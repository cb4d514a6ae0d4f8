package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/acme/smsorch/app"
	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/codec"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/internal/clientopts"
	"github.com/acme/smsorch/internal/pgdb"
	"github.com/acme/smsorch/internal/procs"
)

// stack is one backend's processes: the Temporal server and the
// simulators; workers come and go per scenario.
type stack struct {
	cfg      Config
	backend  string
	dir      string
	frontend string
	server   *procs.Proc
	// ledger is the workers' ledger: a SQLite file or a PostgreSQL DSN.
	ledger string
	// sims by purpose: "main" (no faults, no limit), "failing" (every
	// message ends failed), "sendy" (Sendy's limit of 60 a minute).
	sims    map[string]string
	simProc []*procs.Proc
	keys    string
	// creds are the simulators' credentials, which the workers are given.
	creds simulator.Credentials
	dbs   []string
}

func (s *stack) logf(format string, args ...any) {
	fmt.Fprintf(s.cfg.Log, "[%s %s] %s\n", time.Now().Format("15:04:05"), s.backend, fmt.Sprintf(format, args...))
}

// up starts the server and the simulators.
func (s *stack) up(ctx context.Context) error {
	var err error
	s.creds = simulator.NewCredentials()
	if s.keys, err = codec.NewKey("bench"); err != nil {
		return err
	}
	if s.frontend, err = procs.FreeAddr(); err != nil {
		return err
	}
	args := []string{"--server-only", "--frontend", s.frontend, "--ui", "off", "--log-format", "json", "--log-level", "warn", "--data-dir", filepath.Join(s.dir, "temporal")}
	var env []string
	s.ledger = filepath.Join(s.dir, "ledger.db")
	if s.backend == BackendPostgres {
		db, err := pgdb.Name(s.cfg.Postgres, "smsbench", "temporal")
		if err != nil {
			return err
		}
		s.dbs = append(s.dbs, db, pgdb.WithSuffix(db, "_visibility"))
		env = append(env, app.EnvTemporalDB+"="+db)
		if s.ledger, err = pgdb.Fresh(ctx, s.cfg.Postgres, "smsbench_ledger"); err != nil {
			return err
		}
		s.dbs = append(s.dbs, s.ledger)
	}
	log := filepath.Join(s.dir, "server.log")
	if s.server, err = procs.Start("server", s.cfg.Bins.Server, args, env, log); err != nil {
		return err
	}
	if err := procs.WaitTemporal(ctx, s.server, s.frontend, nil, 3*time.Minute); err != nil {
		return fmt.Errorf("the Temporal server did not come up (see %s): %w", log, err)
	}
	s.sims = map[string]string{}
	for _, sim := range []struct {
		name string
		args []string
	}{
		{"main", []string{"--sendy-rate-limit", "-1"}},
		{"failing", []string{"--sendy-rate-limit", "-1", "--fail-rate", "1"}},
		{"sendy", []string{"--sendy-rate-limit", strconv.Itoa(SendyLimit)}},
	} {
		addr, err := procs.FreeAddr()
		if err != nil {
			return err
		}
		log := filepath.Join(s.dir, "sim-"+sim.name+".log")
		p, err := procs.Start("simulator "+sim.name, s.cfg.Bins.Simulator,
			append([]string{"--addr", addr, "--log-format", "json", "--delivery-delay", DeliveryDelay.String(), "--seed", "1"}, sim.args...), s.creds.Env(), log)
		if err != nil {
			return err
		}
		s.simProc = append(s.simProc, p)
		url := "http://" + addr
		if err := procs.WaitHTTP(ctx, p, url+"/_sim/clock", 30*time.Second); err != nil {
			return fmt.Errorf("the simulator did not come up (see %s): %w", log, err)
		}
		s.sims[sim.name] = url
	}
	return nil
}

// down stops every process and drops the databases it made.
func (s *stack) down(ctx context.Context) {
	procs.StopEach(s.simProc)
	if s.server != nil {
		s.server.Stop(30 * time.Second)
	}
	for _, db := range s.dbs {
		if err := pgdb.Drop(ctx, s.cfg.Postgres, db); err != nil {
			s.logf("could not drop %s: %v", db, err)
		}
	}
}

// env is what every worker and the bench's own client share: where
// Temporal is and the payload keys.
func (s *stack) env() []string {
	return []string{"TEMPORAL_ADDRESS=" + s.frontend, "TEMPORAL_NAMESPACE=" + client.DefaultNamespace, codec.EnvKeys + "=" + s.keys}
}

// clientOptions are the bench's own client's: the same keys as the workers.
func (s *stack) clientOptions() (client.Options, error) {
	kr, err := codec.ParseKeys(s.keys)
	if err != nil {
		return client.Options{}, err
	}
	return clientopts.Build(clientopts.Settings{Address: s.frontend, Logger: quietLogger(), Codec: kr})
}

// workerSpec is one worker process of a scenario.
type workerSpec struct {
	name string
	// bare runs the bare workflow's worker (this program); otherwise the
	// orchestrator's worker against the simulator sim.
	bare  bool
	sim   string
	extra []string
}

// startWorker starts a worker process and waits until it polls.
func (s *stack) startWorker(ctx context.Context, c client.Client, w workerSpec) (*procs.Proc, error) {
	log := filepath.Join(s.dir, w.name+".log")
	tuning := s.cfg.tuningArgs()
	var p *procs.Proc
	var err error
	queues := []string{BareTaskQueue}
	if w.bare {
		p, err = procs.Start(w.name, s.cfg.Self, append([]string{"-role", "bare-worker"}, tuning...), s.env(), log)
	} else {
		args := []string{
			"--ledger", s.ledger, "--intake", "off", "--log-format", "json",
			"--bird-url", w.sim, "--bird-workspace", simulator.DevWorkspace, "--bird-channel", simulator.DevChannel,
			"--sendy-url", w.sim, "--sendy-rate-limit", "0", "--status-poll", s.cfg.StatusPoll.String(),
			// The bench's server, this project's, runs one partition a queue.
			"--task-queue-partitions", "1",
		}
		args = append(append(args, tuning...), w.extra...)
		env := append(s.env(), s.creds.Env()...)
		p, err = procs.Start(w.name, s.cfg.Bins.Worker, args, env, log)
		queues = []string{contract.TaskQueue, contract.ProviderQueue(contract.TaskQueue, "bird")}
	}
	if err != nil {
		return nil, err
	}
	err = procs.WaitReady(ctx, p, "with a poller on its queues", 2*time.Minute, func(ctx context.Context) error {
		for _, q := range queues {
			resp, err := c.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
				Namespace: client.DefaultNamespace, TaskQueue: &taskqueuepb.TaskQueue{Name: q, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
				TaskQueueType: enumspb.TASK_QUEUE_TYPE_WORKFLOW,
			})
			if q != queues[0] {
				resp, err = c.WorkflowService().DescribeTaskQueue(ctx, &workflowservice.DescribeTaskQueueRequest{
					Namespace: client.DefaultNamespace, TaskQueue: &taskqueuepb.TaskQueue{Name: q, Kind: enumspb.TASK_QUEUE_KIND_NORMAL},
					TaskQueueType: enumspb.TASK_QUEUE_TYPE_ACTIVITY,
				})
			}
			if err != nil {
				return err
			}
			if !hasPoller(resp.GetPollers(), p.Cmd.Process.Pid) {
				return fmt.Errorf("no poller of pid %d on %s yet", p.Cmd.Process.Pid, q)
			}
		}
		return nil
	})
	if err != nil {
		p.Kill()
		return nil, fmt.Errorf("%s (see %s): %w", w.name, log, err)
	}
	return p, nil
}

// hasPoller reports whether a poller of process pid is among ps: the
// SDK's identity is pid@host.
func hasPoller(ps []*taskqueuepb.PollerInfo, pid int) bool {
	prefix := strconv.Itoa(pid) + "@"
	for _, p := range ps {
		if len(p.GetIdentity()) > len(prefix) && p.GetIdentity()[:len(prefix)] == prefix {
			return true
		}
	}
	return false
}
