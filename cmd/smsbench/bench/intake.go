package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/acme/smsorch/app"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/intake"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/internal/procs"
	"github.com/acme/smsorch/starter"
)

// IntakeRow is one step of the intake's load: signed posts of new events
// arriving at Rate a second (Poisson arrivals, whatever the answers to
// earlier ones) for Seconds, to one intake process that starts each
// event's run in Temporal before it answers.
type IntakeRow struct {
	Backend string  `json:"backend"`
	Rate    float64 `json:"ratePerSec"`
	Seconds float64 `json:"seconds"`
	// Requests were sent; Errors were answered other than 202 Started,
	// or not at all (FirstError says the first).
	Requests   int    `json:"requests"`
	Errors     int    `json:"errors"`
	FirstError string `json:"firstError,omitempty"`
	// Latency is from each request's arrival to its answer.
	Latency Latencies `json:"latency"`
	// IntakeCPUPer1k is the intake process's CPU seconds per 1,000
	// requests; ServerCPUPer1k the Temporal server's over the same step
	// (which also runs the events the worker is working through).
	IntakeCPUPer1k Seconds `json:"intakeCpuPer1k"`
	ServerCPUPer1k Seconds `json:"serverCpuPer1k"`
}

// ok says whether the step held: no error, p99 within IntakeP99Bound.
func (r IntakeRow) ok() bool {
	return r.Errors == 0 && r.Requests > 0 && float64(r.Latency.P99) <= IntakeP99Bound.Seconds()
}

// The intake's load: steps from Config.IntakeFrom a second, each
// IntakeGrowth times the last, until a step has an error or its p99
// passes IntakeP99Bound, or IntakeMaxSteps have run.
const (
	IntakeGrowth   = 1.5
	IntakeMaxSteps = 12
	IntakeP99Bound = time.Second
)

// intakeLoad runs the intake's steps on one backend: an intake process
// (this program, -role intake: the intake package's handler, as the
// worker serves it, with its own Temporal client and no per-client
// limit), and a worker that runs the events it starts. Every event the
// intake answered Started must have its run.
func (s *stack) intakeLoad(ctx context.Context, c client.Client, rep *Report) error {
	w, err := s.startWorker(ctx, c, workerSpec{name: "worker-intake", sim: s.sims["main"]})
	if err != nil {
		return err
	}
	defer w.Stop(stopGrace)
	secret, err := randomSecret()
	if err != nil {
		return err
	}
	addr, err := procs.FreeAddr()
	if err != nil {
		return err
	}
	log := filepath.Join(s.dir, "intake.log")
	p, err := procs.Start("intake", s.cfg.Self, []string{"-role", "intake", "-addr", addr}, append(s.env(), app.EnvIntakeSecret+"="+secret), log)
	if err != nil {
		return err
	}
	defer p.Stop(stopGrace)
	url := "http://" + addr
	if err := procs.WaitHTTP(ctx, p, url+"/healthz", time.Minute); err != nil {
		return fmt.Errorf("the intake did not come up (see %s): %w", log, err)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 512}}
	defer hc.CloseIdleConnections()
	since := time.Now().Add(-time.Second)
	started := 0
	rate := s.cfg.IntakeFrom
	for step := range IntakeMaxSteps {
		s.logf("intake: %.1f signed posts/s for %s", rate, s.cfg.IntakeFor)
		row, err := s.intakeStep(ctx, hc, url, logging.Secret(secret), p, rate, uint64(step+1))
		if err != nil {
			return err
		}
		started += row.Requests - row.Errors
		rep.Intake = append(rep.Intake, row)
		s.logf("intake: %d requests, %d errors, p99 %.3f s", row.Requests, row.Errors, row.Latency.P99)
		if !row.ok() {
			break
		}
		rate *= IntakeGrowth
	}
	// Nothing lost: each Started answer is a run. (A request that failed
	// may still have started one; it is not counted either way.)
	q := visibilityQuery(contract.WorkflowName, since)
	if err := awaitCounted(ctx, c, q, time.Minute, fmt.Sprintf("at least %d", started), func(n int64) bool { return n >= int64(started) }); err != nil {
		return fmt.Errorf("fewer runs than the events the intake answered Started: %w", err)
	}
	return nil
}

// intakeStep posts new events at rate a second for IntakeFor: the
// step's row (a request without an error was answered Started).
func (s *stack) intakeStep(ctx context.Context, hc *http.Client, url string, secret logging.Secret, p *procs.Proc, rate float64, seed uint64) (IntakeRow, error) {
	row := IntakeRow{Backend: s.backend, Rate: rate, Seconds: s.cfg.IntakeFor.Seconds()}
	iBefore, sBefore, err := s.usages(p)
	if err != nil {
		return row, err
	}
	pre := prefix(scenarioIntake)
	var mu sync.Mutex
	var lat []time.Duration
	_, err = arrivals(ctx, rate, s.cfg.IntakeFor, seed, func(ctx context.Context, i int) error {
		t0 := time.Now()
		err := postSigned(ctx, hc, url, secret, event(pre, i, "bird"))
		d := time.Since(t0)
		mu.Lock()
		defer mu.Unlock()
		row.Requests++
		lat = append(lat, d)
		if err != nil {
			if row.Errors++; row.FirstError == "" {
				row.FirstError = err.Error()
			}
		}
		return nil // an error is measured, not a reason to stop the step
	})
	if err != nil {
		return row, err
	}
	iAfter, sAfter, err := s.usages(p)
	if err != nil {
		return row, err
	}
	row.Latency = summarise(lat)
	if row.Requests > 0 {
		row.IntakeCPUPer1k = per1k(iAfter.CPU-iBefore.CPU, row.Requests)
		row.ServerCPUPer1k = per1k(sAfter.CPU-sBefore.CPU, row.Requests)
	}
	return row, nil
}

// postSigned posts e to the intake, signed as a sender signs it; an
// answer other than 202 Started is an error.
func postSigned(ctx context.Context, hc *http.Client, url string, secret logging.Secret, e starter.Event) error {
	body, err := json.Marshal(e)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/events", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range intake.Sign(secret, time.Now(), body) {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(answer))
	}
	return nil
}

func randomSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// RunIntake is the -role intake child: the intake's handler on addr,
// starting runs through its own client (the keys and Temporal address
// from the environment, as the worker's), with no per-client limit so
// one load generator can reach it, until ctx ends.
func RunIntake(ctx context.Context, addr string) error {
	secret := os.Getenv(app.EnvIntakeSecret)
	if secret == "" {
		return errors.New("-role intake needs " + app.EnvIntakeSecret)
	}
	opts, err := childClientOptions()
	if err != nil {
		return err
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return err
	}
	defer c.Close()
	h := intake.New(starter.New(c), intake.Config{Secrets: []logging.Secret{logging.Secret(secret)}, RatePerMinute: -1, Logger: quietLogger()})
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := intake.NewServer(h)
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.WithoutCancel(ctx))
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
