// Package drill runs the fault drill: the orchestrator as separate
// processes (the provider simulator alone, so it outlives the worker, and
// the dev worker on its own state directory with shortened windows),
// driven with duplicate starts, faults of every kind, SIGKILLs of the
// worker and a slice of events whose provider stays down past the window.
// At the end it counts, per event, the messages the simulator created
// under all the event's keys beside the run's result and the audit, and
// reports every silent duplicate, lost event, message the run does not
// know and resend without a reconciliation. cmd/smsdrill is its command.
package drill

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/acme/smsorch/audit"
	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/codec"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/internal/clientopts"
	"github.com/acme/smsorch/internal/devmode"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/internal/pgdb"
	"github.com/acme/smsorch/internal/procs"
	"github.com/acme/smsorch/keys"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/provider/bird"
	"github.com/acme/smsorch/provider/sendy"
	"github.com/acme/smsorch/starter"
)

// Config is one drill run. Zero fields take the defaults in WithDefaults.
type Config struct {
	// Events is the number of events, half per provider. Default 1000.
	Events int
	// Seed drives the fault rates, the down slice and the decisions.
	Seed uint64
	// Kills is how many times the worker is killed (SIGKILL) and
	// restarted, one every half replay window from the start, while runs
	// are in flight. Default 3; negative for none.
	Kills int
	// Window is the replay window of both providers, at the simulator and
	// in the worker's policy. Default 40 s.
	Window time.Duration
	// FaultRate is the share of send requests that get each fault kind.
	// Default 0.01 (about 9 % of requests get one of the nine kinds).
	FaultRate float64
	// DownShare is the share of events whose provider stays down (500 on
	// every attempt under the event key) past the window. Default 0.05.
	DownShare float64
	// LateShare is the share of events whose first attempt takes effect
	// without storing its answer and whose second is rate limited past the
	// window, so the last attempt makes a second message. Default 0.03.
	LateShare float64
	// SecondKeyShare is the share of events whose first message fails and
	// whose resend key's first attempt takes effect without storing its
	// answer while every later one fails: the resend's outcome is unknown
	// with a message behind it. Default 0.03.
	SecondKeyShare float64
	// FailoverShare is the share of events whose provider answers every
	// attempt "not executed" (Bird 503 E01033, Sendy 429) for the whole
	// run, with the other provider as their fallback: the run moves to
	// it, once. Default 0.04.
	FailoverShare float64
	// ResetShare is the share of events whose run an operator resets
	// (the web UI's Reset) to a workflow task drawn by the seed, at a time
	// drawn by the seed in the first one and a half replay windows: after
	// acceptance, while awaiting a decision, mid-retry, or after it ended.
	// Default 0.04.
	ResetShare float64
	// RotateShare is the share of events that meet a credential rotation:
	// the first attempt takes effect without storing its answer (500),
	// and the second is refused 401, as when the provider's credential
	// was rotated mid-load; later attempts go through. Default 0.03.
	RotateShare float64
	// SendyBurst adds that many Sendy events, started at once, and turns
	// on Sendy's limit of 60 requests a minute at the simulator and the
	// workers' default fleet limit: sends wait in the task queue past
	// their window. Default 0 (no burst, no limit).
	SendyBurst int
	// Hang is how long hung requests wait before they take effect, and
	// LockLifetime Bird's in-flight lock: shorter than the hang, so a
	// retry meanwhile sends too. Defaults 4 s and 3 s.
	Hang, LockLifetime time.Duration
	// Concurrency is how many events are started at once. Default 32.
	Concurrency int
	// Postgres, when set, is a PostgreSQL server (a DSN of any database on
	// it): the drill makes a fresh database there and the worker keeps its
	// ledger in it instead of a SQLite file.
	Postgres string
	// Cluster runs the production shape instead of one dev process: two
	// Temporal server processes as one cluster on a fresh PostgreSQL
	// database, and two workers outside dev mode sharing the PostgreSQL
	// ledger, each with its intake. The first kill is a SIGKILL of the
	// second server (not restarted: its shards move to the survivor); the
	// others kill a worker in turn and restart it. Needs Postgres.
	Cluster bool
	// Dir holds the worker's state and the processes' logs.
	Dir  string
	Bins procs.Binaries
	// Progress receives a line per phase.
	Progress io.Writer
}

// WithDefaults fills the zero fields.
func (c Config) WithDefaults() Config {
	orDefault(&c.Events, 1000)
	orDefault(&c.Kills, 3)
	orDefault(&c.Window, 40*time.Second)
	orDefault(&c.FaultRate, 0.01)
	orDefault(&c.DownShare, 0.05)
	orDefault(&c.LateShare, 0.03)
	orDefault(&c.SecondKeyShare, 0.03)
	orDefault(&c.FailoverShare, 0.04)
	orDefault(&c.ResetShare, 0.04)
	orDefault(&c.RotateShare, 0.03)
	orDefault(&c.Hang, 4*time.Second)
	orDefault(&c.LockLifetime, 3*time.Second)
	orDefault(&c.Concurrency, 32)
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c
}

func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// attemptTimeout is the worker's HTTP attempt timeout in the drill:
// shorter than the hang, so hung requests outlive their client.
const attemptTimeout = 2 * time.Second

type drill struct {
	cfg Config
	// ledger is the worker's --ledger: a SQLite file or a postgres:// DSN.
	ledger string
	rng    *rand.Rand
	simURL string
	// keySpec and keys seal the runs' payloads (SMSORCH_CODEC_KEYS).
	keySpec string
	// creds are the simulator's credentials, which the workers are given.
	creds simulator.Credentials
	keys  *codec.Keyring
	topology
	st     *starter.Starter
	tc     client.Client
	events []*event
}

type event struct {
	e    starter.Event
	key  string
	down bool
	// slice names the event's scripted faults: "down", "late",
	// "second-key", "failover", "rotated", "reset", "burst" or "".
	slice string
	// resetAfter and resetPoint, for the reset slice: when after its
	// posts the run is reset, and which of its workflow tasks (a share of
	// those completed then) it is reset to.
	resetAfter time.Duration
	resetPoint float64
	mu         sync.Mutex
	out        Outcome
}

func (d *drill) logf(format string, args ...any) {
	_, _ = fmt.Fprintf(d.cfg.Progress, "[seed %d %s] %s\n", d.cfg.Seed, time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// Run runs one drill and returns its summary and every event's outcome.
func Run(ctx context.Context, cfg Config) (Summary, []Outcome, error) {
	cfg = cfg.WithDefaults()
	if cfg.Dir == "" {
		return Summary{}, nil, errors.New("drill: a working directory is needed (Config.Dir)")
	}
	d := &drill{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eed))}
	var err error
	if err = os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return Summary{}, nil, err
	}
	d.ledger = filepath.Join(cfg.Dir, "state", "ledger.db")
	if cfg.Postgres != "" {
		if d.ledger, err = pgdb.Fresh(ctx, cfg.Postgres, fmt.Sprintf("smsdrill_%d", cfg.Seed)); err != nil {
			return Summary{}, nil, err
		}
		d.logf("the ledger is on PostgreSQL: %s", logging.RedactDSN(d.ledger))
	}
	// Every process of the drill seals payloads with one fresh key.
	d.creds = simulator.NewCredentials()
	if d.keySpec, err = codec.NewKey(fmt.Sprintf("drill-%d", cfg.Seed)); err != nil {
		return Summary{}, nil, err
	}
	if d.keys, err = codec.ParseKeys(d.keySpec); err != nil {
		return Summary{}, nil, err
	}
	sim, err := d.startSimulator(ctx)
	if err != nil {
		return Summary{}, nil, err
	}
	defer sim.Stop(5 * time.Second)
	d.plan()
	if err := d.installFaults(); err != nil {
		return Summary{}, nil, err
	}
	if err := d.startProcesses(ctx); err != nil {
		d.stopAll()
		return Summary{}, nil, err
	}
	defer d.stopAll()
	// The workers' keys: the runs' payloads are sealed.
	opts, err := clientopts.Build(clientopts.Settings{Address: strings.Join(d.frontends, ","), Codec: d.keys, TLS: d.clientTLS()})
	if err != nil {
		return Summary{}, nil, err
	}
	tc, err := client.DialContext(ctx, opts)
	if err != nil {
		return Summary{}, nil, fmt.Errorf("drill: dial Temporal at %s: %w", strings.Join(d.frontends, ","), err)
	}
	defer tc.Close()
	d.tc, d.st = tc, starter.New(tc)

	d.logf("starting %d events (3 posts each at once: 2 through the HTTP intake, 1 through the Go API), %d kills planned", len(d.events), cfg.Kills)
	if err := d.startAll(ctx); err != nil {
		return Summary{}, nil, err
	}
	d.logf("waiting for every run to end or await a decision")
	if err := d.decideAndDrain(ctx); err != nil {
		return Summary{}, nil, err
	}
	d.logf("every run ended; collecting results and posting every event once more")
	d.collectResults(ctx)
	d.logf("searching the runs' timelines and smsctl's output for a recipient in full")
	leaks, err := d.plainInRuns(ctx)
	if err != nil {
		return Summary{}, nil, err
	}
	d.stopWorkers()
	if err := d.countMessages(ctx); err != nil {
		return Summary{}, nil, err
	}
	if err := d.auditAll(ctx); err != nil {
		return Summary{}, nil, err
	}
	d.logf("searching the logs and the ledger for a recipient in full")
	atRest, err := d.plainAtRest(ctx)
	if err != nil {
		return Summary{}, nil, err
	}
	leaks = append(leaks, atRest...)
	outs := make([]Outcome, len(d.events))
	for i, e := range d.events {
		outs[i] = e.out
	}
	s := Summarize(cfg.Seed, len(d.killed), outs)
	s.PlainRecipients = leaks
	s.Topology, s.KillsDone = d.describe(), d.killed
	if cfg.Postgres != "" && len(s.Violations()) == 0 {
		// A drill that kept every promise leaves nothing to inspect.
		d.stopAll()
		for _, db := range d.databases() {
			if err := pgdb.Drop(ctx, cfg.Postgres, db); err != nil {
				d.logf("could not drop the drill's database %s: %v", logging.RedactDSN(db), err)
			}
		}
	}
	return s, outs, nil
}

func (d *drill) startSimulator(ctx context.Context) (*procs.Proc, error) {
	addr, err := procs.FreeAddr()
	if err != nil {
		return nil, err
	}
	d.simURL = "http://" + addr
	// Sendy's limit (60 a minute) only with a burst: it holds every Sendy
	// request of the drill to its pace.
	sendyLimit := "-1"
	if d.cfg.SendyBurst > 0 {
		sendyLimit = fmt.Sprint(simulator.DefaultSendyRateLimit)
	}
	p, err := procs.Start("simulator", d.cfg.Bins.Simulator, []string{
		"--addr", addr, "--seed", fmt.Sprint(d.cfg.Seed), "--log-format", "json",
		"--bird-retention", d.cfg.Window.String(), "--sendy-retention", d.cfg.Window.String(),
		"--lock-expiry", d.cfg.LockLifetime.String(), "--delivery-delay", "1s", "--sendy-rate-limit", sendyLimit,
	}, d.creds.Env(), filepath.Join(d.cfg.Dir, "simulator.log"))
	if err != nil {
		return nil, err
	}
	if err := procs.WaitHTTP(ctx, p, d.simURL+"/_sim/clock", 30*time.Second); err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}

// plan makes the events: half per provider, a seeded slice of them down.
func (d *drill) plan() {
	for i := 0; i < d.cfg.Events; i++ {
		id := fmt.Sprintf("%d%06d", d.cfg.Seed%1000, i)
		e := starter.Event{Kind: "order", ID: id, Stage: "shipped", Provider: string(provider.Bird), To: "+31612345678", Text: "Order " + id + " has shipped."}
		if i%2 == 1 {
			e.Provider, e.To = string(provider.Sendy), "+972502345678"
		}
		k, err := keys.Event(e.Kind, e.ID, e.Stage)
		if err != nil {
			panic(err) // the ids above are always valid
		}
		ev := &event{e: e, key: string(k)}
		switch x := d.rng.Float64(); {
		case x < d.cfg.DownShare:
			ev.slice = "down"
		case x < d.cfg.DownShare+d.cfg.LateShare:
			ev.slice = "late"
		case x < d.cfg.DownShare+d.cfg.LateShare+d.cfg.SecondKeyShare:
			ev.slice = "second-key"
		case x < d.cfg.DownShare+d.cfg.LateShare+d.cfg.SecondKeyShare+d.cfg.FailoverShare:
			ev.slice = "failover"
			ev.e.Fallback = string(provider.Sendy)
			if e.Provider == string(provider.Sendy) {
				ev.e.Fallback = string(provider.Bird)
			}
		case x < d.cfg.DownShare+d.cfg.LateShare+d.cfg.SecondKeyShare+d.cfg.FailoverShare+d.cfg.RotateShare:
			ev.slice = "rotated"
		case x < d.cfg.DownShare+d.cfg.LateShare+d.cfg.SecondKeyShare+d.cfg.FailoverShare+d.cfg.RotateShare+d.cfg.ResetShare:
			ev.slice = "reset"
			ev.resetAfter = time.Duration(d.rng.Float64() * 1.5 * float64(d.cfg.Window))
			ev.resetPoint = d.rng.Float64()
		}
		ev.down = ev.slice == "down"
		ev.out = Outcome{Key: ev.key, Provider: provider.Name(e.Provider), Down: ev.down, Slice: ev.slice}
		d.events = append(d.events, ev)
	}
	for i := 0; i < d.cfg.SendyBurst; i++ {
		id := fmt.Sprintf("%d%06d", d.cfg.Seed%1000, d.cfg.Events+i)
		e := starter.Event{Kind: "order", ID: id, Stage: "shipped", Provider: string(provider.Sendy), To: "+972502345678", Text: "Order " + id + " has shipped."}
		k, err := keys.Event(e.Kind, e.ID, e.Stage)
		if err != nil {
			panic(err) // the ids above are always valid
		}
		d.events = append(d.events, &event{e: e, key: string(k), slice: "burst",
			out: Outcome{Key: string(k), Provider: provider.Sendy, Slice: "burst"}})
	}
}

// installFaults puts the down slice's rules first (the first rule that
// fires applies), then every fault kind by rate on both providers.
func (d *drill) installFaults() error {
	var rules []simulator.Fault
	slices := map[string]int{}
	for _, e := range d.events {
		p := e.e.Provider
		slices[e.slice]++
		switch e.slice {
		case "down":
			rules = append(rules, simulator.Fault{Kind: simulator.Error5xx, Provider: p, Key: e.key, Rate: 1})
		case "late":
			rules = append(rules,
				simulator.Fault{Kind: simulator.Unstored, Provider: p, Key: e.key, Count: 1},
				simulator.Fault{Kind: simulator.RateLimit, Provider: p, Key: e.key, Count: 1, Delay: simulator.Duration(2 * d.cfg.Window)})
		case "failover":
			// Answers that say the request was not executed: Bird's 503
			// E01033; for Sendy, whose 503 leaves the outcome unknown, 429.
			down := simulator.Fault{Kind: simulator.Unavailable, Provider: p, Key: e.key, Rate: 1}
			if p == string(provider.Sendy) {
				down = simulator.Fault{Kind: simulator.RateLimit, Provider: p, Key: e.key, Rate: 1, Delay: simulator.Duration(time.Second)}
			}
			rules = append(rules, down)
		case "rotated":
			// The credential was rotated after the first attempt took
			// effect: its answer was lost, the next is refused 401.
			rules = append(rules,
				simulator.Fault{Kind: simulator.Unstored, Provider: p, Key: e.key, Count: 1},
				simulator.Fault{Kind: simulator.Unauthorized, Provider: p, Key: e.key, Count: 1})
		case "reset":
			// Mid-retry at the reset for some: two attempts fail first.
			rules = append(rules, simulator.Fault{Kind: simulator.Error5xx, Provider: p, Key: e.key, Count: 2})
		case "second-key":
			resend := e.key + "~resend-1"
			rules = append(rules,
				simulator.Fault{Kind: simulator.FailDelivery, Provider: p, Key: e.key, Count: 1},
				simulator.Fault{Kind: simulator.Unstored, Provider: p, Key: resend, Count: 1},
				simulator.Fault{Kind: simulator.Error5xx, Provider: p, Key: resend, Rate: 1})
		}
	}
	hang := simulator.Duration(d.cfg.Hang)
	for _, p := range []string{string(provider.Bird), string(provider.Sendy)} {
		for _, k := range simulator.Kinds {
			f := simulator.Fault{Kind: k, Provider: p, Rate: d.cfg.FaultRate}
			switch k {
			case simulator.Hang, simulator.LockExpiry:
				f.Delay = hang
			case simulator.RateLimit:
				f.Delay = simulator.Duration(time.Second)
			case simulator.Unauthorized:
				continue // a refused credential is no transient fault: never retried, so not spread at random
			case simulator.LookupsDown:
				continue // a read fault: the drill spreads send faults, and its audit at the end reads every event
			}
			if f.Validate() != nil {
				continue // a kind the other provider's contract has
			}
			rules = append(rules, f)
		}
	}
	b, _ := json.Marshal(rules)
	resp, err := http.Post(d.simURL+"/_sim/faults", "application/json", bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("drill: install faults: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("drill: install faults: %d %s", resp.StatusCode, body)
	}
	d.logf("installed %d fault rules (rate %.3f per kind); scripted events: %d down past the window, %d late second message, %d unknown resend, %d down for the whole run with a fallback, %d credential rotations after an unknown attempt, %d runs reset by an operator, %d Sendy events in a burst",
		len(rules), d.cfg.FaultRate, slices["down"], slices["late"], slices["second-key"], slices["failover"], slices["rotated"], slices["reset"], slices["burst"])
	return nil
}

// killSpacing is the time between two kills: half a replay window, so
// each kill meets runs in every phase (sending, retrying, reconciling,
// tracking) and the worker has come back up before the next.
func (d *drill) killSpacing() time.Duration { return max(d.cfg.Window/2, 10*time.Second) }

// startAll posts every event three times at once, Concurrency events at
// a time, while the worker is killed every killSpacing from the start.
// It returns when every event is posted and every kill is done.
func (d *drill) startAll(ctx context.Context) error {
	killErr := make(chan error, 1)
	go func() {
		for k := 0; k < d.cfg.Kills; k++ {
			select {
			case <-ctx.Done():
				killErr <- ctx.Err()
				return
			case <-time.After(d.killSpacing()):
			}
			if err := d.killAndRestart(ctx); err != nil {
				killErr <- err
				return
			}
		}
		killErr <- nil
	}()
	// In the cluster the starts are spread over the first two kills, so
	// the server's death and a worker's meet starts as well as runs.
	var spread time.Duration
	if d.cfg.Cluster {
		spread = 2 * d.killSpacing()
	}
	begin := time.Now()
	index := make(map[*event]int, len(d.events))
	for i, e := range d.events {
		index[e] = i
	}
	var resets sync.WaitGroup
	d.each(func(e *event) {
		time.Sleep(time.Until(begin.Add(spread * time.Duration(index[e]) / time.Duration(len(d.events)))))
		d.postThrice(ctx, e)
		if e.slice == "reset" {
			resets.Add(1)
			go func() {
				defer resets.Done()
				time.Sleep(e.resetAfter)
				d.resetRun(ctx, e)
			}()
		}
	})
	d.logf("all events posted")
	resets.Wait()
	return <-killErr
}

// postThrice posts the event through the intake twice and the Go API
// once, all at once, each retried as a well-behaved client would until
// it is answered (the worker may be down: that is the drill).
func (d *drill) postThrice(ctx context.Context, e *event) {
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var started bool
			var err error
			if i == 2 {
				started, err = d.retry(ctx, func(ctx context.Context) (bool, error) { return d.sendGo(ctx, e) })
			} else {
				started, err = d.retry(ctx, func(ctx context.Context) (bool, error) { return d.postIntake(ctx, e) })
			}
			e.mu.Lock()
			defer e.mu.Unlock()
			switch {
			case err != nil:
				d.logf("event %s: a start was never answered: %v", e.key, err)
				e.out.Unanswered++
			case started:
				e.out.Started++
			default:
				e.out.Existing++
			}
		}()
	}
	wg.Wait()
}

// errRetry marks an answer that says "try again".
var errRetry = errors.New("retry")

func (d *drill) retry(ctx context.Context, f func(context.Context) (bool, error)) (bool, error) {
	deadline := time.Now().Add(5 * time.Minute)
	wait := 200 * time.Millisecond
	for {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		started, err := f(cctx)
		cancel()
		if err == nil || !errors.Is(err, errRetry) || time.Now().After(deadline) {
			return started, err
		}
		time.Sleep(wait)
		wait = min(2*wait, 3*time.Second)
	}
}

func (d *drill) postIntake(ctx context.Context, e *event) (bool, error) {
	b, _ := json.Marshal(e.e)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+d.nextIntake()+"/v1/events", bytes.NewReader(b))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, fmt.Errorf("%w: %v", errRetry, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	switch resp.StatusCode {
	case http.StatusAccepted:
		return true, nil
	case http.StatusOK:
		return false, nil
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return false, fmt.Errorf("%w: %d", errRetry, resp.StatusCode)
	case http.StatusTooManyRequests:
		// The intake's rate per client: wait as told, then send again.
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
			time.Sleep(time.Duration(secs) * time.Second)
		}
		return false, fmt.Errorf("%w: %d", errRetry, resp.StatusCode)
	}
	return false, fmt.Errorf("intake answered %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
}

func (d *drill) sendGo(ctx context.Context, e *event) (bool, error) {
	res, err := d.st.Send(ctx, e.e)
	if err != nil {
		if errors.Is(err, starter.ErrInvalid) || errors.Is(err, starter.ErrConflict) {
			return false, err
		}
		return false, fmt.Errorf("%w: %v", errRetry, err)
	}
	return res.Started, nil
}

// busyQuery counts the runs neither ended nor awaiting a decision.
var busyQuery = fmt.Sprintf(`WorkflowType = %q AND ExecutionStatus = "Running" AND %s != %q`,
	contract.WorkflowName, contract.StateAttribute.GetName(), string(contract.AwaitingDecision))

// settle waits until every run has ended or awaits a decision, and
// returns the keys awaiting one. It counts instead of listing every run,
// so its own load on the server stays small.
func (d *drill) settle(ctx context.Context, within time.Duration) ([]string, error) {
	deadline := time.Now().Add(within)
	lastReport := time.Now()
	for {
		busy, err := d.tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: busyQuery})
		if err == nil && busy.GetCount() == 0 {
			runs, lerr := d.st.List(ctx, contract.AwaitingDecision, 0)
			if lerr == nil {
				var awaiting []string
				for _, r := range runs {
					if r.Status == "Running" {
						awaiting = append(awaiting, r.Key)
					}
				}
				sort.Strings(awaiting)
				return awaiting, nil
			}
			err = lerr
		}
		switch {
		case time.Now().After(deadline) && err != nil:
			return nil, fmt.Errorf("drill: count the runs: %w", err)
		case time.Now().After(deadline):
			return nil, fmt.Errorf("drill: %d runs still busy after %s", busy.GetCount(), within)
		case time.Since(lastReport) > 30*time.Second && err == nil:
			d.logf("%d runs still sending, reconciling or tracking", busy.GetCount())
			lastReport = time.Now()
		}
		time.Sleep(3 * time.Second)
	}
}

// decideAndDrain decides for every run awaiting a decision: resend
// first; where only a forced (blind) resend would send, force half of
// them and cancel the rest; cancel what still waits after that.
func (d *drill) decideAndDrain(ctx context.Context) error {
	for round := 1; ; round++ {
		awaiting, err := d.settle(ctx, 10*time.Minute)
		if err != nil {
			return err
		}
		if len(awaiting) == 0 {
			return nil
		}
		if round > 4 {
			return fmt.Errorf("drill: %d runs still await a decision after %d rounds: %s", len(awaiting), round-1, strings.Join(first(awaiting, 10), ", "))
		}
		d.logf("round %d: %d runs await a decision", round, len(awaiting))
		d.unknownButUnsent(ctx, awaiting)
		for _, k := range awaiting {
			e := d.byKey(k)
			action, force := contract.ActionResend, false
			if round >= 3 {
				action = contract.ActionCancel // what still waits is cancelled
			}
			dec := contract.Decision{Action: action, Reason: fmt.Sprintf("fault drill, round %d", round), By: "smsdrill"}
			_, err := d.st.Decide(ctx, k, dec)
			if err != nil && action == contract.ActionResend && strings.Contains(err.Error(), `"force": true`) {
				force = d.rng.IntN(2) == 0
				if force {
					dec.Force = true
				} else {
					dec.Action = contract.ActionCancel
				}
				_, err = d.st.Decide(ctx, k, dec)
			}
			if err != nil {
				d.logf("decision for %s not applied (tried again next round): %v", k, err)
				continue
			}
			if force {
				e.mu.Lock()
				e.out.Forced = true
				e.mu.Unlock()
			}
		}
		time.Sleep(2 * time.Second)
	}
}

func (d *drill) byKey(k string) *event {
	for _, e := range d.events {
		if e.key == k {
			return e
		}
	}
	panic("drill: unknown key " + k)
}

// collectResults reads each run's Result and posts the event once more:
// its run has ended, so the start must answer "existing".
func (d *drill) collectResults(ctx context.Context) {
	d.each(func(e *event) {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		res, err := d.st.Wait(wctx, e.key)
		cancel()
		_, isResult := contract.ResultFromError(err)
		requeued := 0
		if e.slice == "burst" {
			// How often the run found that its send never left the task
			// queue within the window, and sent again.
			if st, serr := d.st.Status(ctx, e.key); serr == nil {
				for _, l := range st.Timeline {
					if strings.Contains(l.Text, "never left the task queue") {
						requeued++
					}
				}
			}
		}
		started, perr := d.retry(ctx, func(ctx context.Context) (bool, error) { return d.postIntake(ctx, e) })
		e.mu.Lock()
		defer e.mu.Unlock()
		e.out.Ended = err == nil || isResult
		e.out.Result = res
		e.out.Requeued = requeued
		switch {
		case perr != nil:
			e.out.AfterSettled = "error: " + perr.Error()
		case started:
			e.out.AfterSettled = "started"
		default:
			e.out.AfterSettled = "existing"
		}
	})
}

// each runs f for every event, Concurrency events at a time.
func (d *drill) each(f func(*event)) {
	sem := make(chan struct{}, d.cfg.Concurrency)
	var wg sync.WaitGroup
	for _, e := range d.events {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			f(e)
		}()
	}
	wg.Wait()
}

// countMessages reads every message the simulator created and gives each
// event those under its key and its resend keys.
func (d *drill) countMessages(ctx context.Context) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.simURL+"/_sim/messages", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("drill: read the simulator's messages: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Messages []simulator.Message `json:"messages"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("drill: read the simulator's messages: %w", err)
	}
	byEvent := map[string][]simulator.Message{}
	for _, m := range body.Messages {
		base, _, _ := strings.Cut(m.Key, "~")
		byEvent[base] = append(byEvent[base], m)
	}
	for _, e := range d.events {
		e.out.Messages = append([]simulator.Message{}, byEvent[e.key]...)
	}
	return nil
}

// auditAll runs the audit (ledger beside the provider's records) for
// every event, as smsctl audit does.
func (d *drill) auditAll(ctx context.Context) error {
	led, err := ledger.Open(ctx, d.ledger, ledger.WithKeys(d.keys))
	if err != nil {
		return fmt.Errorf("drill: open the ledger: %w", err)
	}
	defer func() { _ = led.Close() }()
	bc, err := bird.New(devmode.BirdConfig(d.simURL, d.creds.BirdAccessKey, 10*time.Second))
	if err != nil {
		return err
	}
	sc, err := sendy.New(devmode.SendyConfig(d.simURL, d.creds.SendyToken, "", 10*time.Second))
	if err != nil {
		return err
	}
	// The simulator's faults apply to sends only, and the audit only reads.
	clients := map[provider.Name]provider.Client{provider.Bird: bc, provider.Sendy: sc}
	for _, e := range d.events {
		r, err := audit.Build(ctx, led, clients, e.key, time.Now())
		if err != nil {
			e.out.Audit = "audit failed: " + err.Error()
			continue
		}
		e.out.Audit = r.Verdict()
		e.out.AuditDuplicate = len(r.Duplicates) > 0
	}
	return nil
}
