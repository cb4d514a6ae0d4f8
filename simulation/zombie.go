package simulation

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/acme/smsorch/internal/logging"
)

// zombie is an activity a reset left running: Temporal's reset ends the
// run, not the work its worker has in hand, so a Send, a search or a
// ledger step of the replaced run still acts a moment later, under the
// replaced run's id, while the new run goes on. Its result reaches no
// one; its effects (a message, a ledger row, a settle) stay.
type zombie struct {
	name    string
	runID   string
	attempt int32
	at      time.Time
	act     func(context.Context) (string, error)
	done    bool
}

// runLateZombies lets the zombies that have not acted yet (their run's
// last segment ended before their moment) act, in order, each at its
// moment or now, whichever is later.
func (lt *lifetime) runLateZombies() {
	now := lt.w.clock.Now()
	for _, z := range lt.zombies {
		if z.done {
			continue
		}
		if z.at.After(now) {
			lt.w.clock.at(z.at)
		}
		lt.runZombie(z)
		lt.w.clock.at(time.Time{})
	}
}

// runZombie runs the zombie's activity in an activity environment of
// its own, whose info names the replaced run and the attempt it was.
func (lt *lifetime) runZombie(z *zombie) {
	if z.done {
		return
	}
	z.done = true
	var ts testsuite.WorkflowTestSuite
	ts.SetLogger(logging.SDK(zap.NewNop()))
	env := ts.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{Interceptors: []interceptor.WorkerInterceptor{&zombieInterceptor{z: z, workflowID: lt.sc.Input.Key}}})
	env.RegisterActivityWithOptions(func(ctx context.Context) (string, error) {
		return z.act(context.WithoutCancel(ctx))
	}, activity.RegisterOptions{Name: "Zombie"})
	holder := ""
	if e, err := lt.w.led.Event(context.Background(), lt.sc.Input.Key); err == nil {
		holder = e.RunID
	}
	lt.w.tr.mu.Lock()
	sends := lt.w.tr.sends
	lt.w.tr.mu.Unlock()
	var what string
	v, err := env.ExecuteActivity("Zombie")
	if err == nil {
		_ = v.Get(&what)
	} else {
		what = "-> " + err.Error()
	}
	now := lt.w.clock.Now()
	lt.tl.add(now, "activity", "%s of the replaced run %s (attempt %d), still in flight when the reset came, acts: %s", z.name, z.runID, z.attempt, what)
	lt.w.tr.mu.Lock()
	sent := lt.w.tr.sends - sends
	lt.w.tr.mu.Unlock()
	if sent > 0 && holder != "" && holder != z.runID {
		// Read from the world: the provider's requests and the ledger's
		// holder, not from either run.
		lt.viol = append(lt.viol, fmt.Sprintf("the %s of run %s, which a reset replaced, reached a provider at %s while the ledger named run %s the event's holder",
			z.name, z.runID, at(lt.sc, now), holder))
	}
	lt.watchLedger(now, z.name+" of a replaced run")
}

// zombieInterceptor gives the zombie's activity the replaced run's
// workflow, run and attempt.
type zombieInterceptor struct {
	interceptor.WorkerInterceptorBase
	z          *zombie
	workflowID string
}

func (w *zombieInterceptor) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return infoEditor(next, func(info *activity.Info) {
		info.WorkflowExecution.ID = w.workflowID
		info.WorkflowExecution.RunID = w.z.runID
		info.Attempt = w.z.attempt
		info.ActivityType.Name = w.z.name
	})
}
