package simulation

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/ledger"
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

// runZombies lets every zombie whose moment has come act (all of them
// when all), each at its own moment, in order.
func (lt *lifetime) runZombies(now time.Time, all bool) {
	for _, z := range lt.zombies {
		if z.done || (!all && z.at.After(now)) {
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

// watchLedger reads the ledger's record of the event after an activity
// call and checks that it never went back: a settled outcome is never
// replaced by one that knows less of a message that went out (ledger.Rank),
// and no message id it held leaves it (docs/design.md, the ledger).
func (lt *lifetime) watchLedger(now time.Time, after string) {
	e, err := lt.w.led.Event(context.Background(), lt.sc.Input.Key)
	if err != nil {
		return // not claimed yet
	}
	if p := lt.record; p != nil {
		switch {
		case p.Settled() && !e.Settled():
			lt.viol = append(lt.viol, fmt.Sprintf("after %s at %s the ledger's record of the event is no longer settled (was %s)", after, at(lt.sc, now), p.Outcome))
		case p.Settled() && ledger.Rank(e.Outcome) < ledger.Rank(p.Outcome):
			lt.viol = append(lt.viol, fmt.Sprintf("after %s at %s the ledger's outcome went back from %s (%s) to %s (%s): a settle replaced one that knew more of a message that went out",
				after, at(lt.sc, now), p.Outcome, p.MessageID, e.Outcome, e.MessageID))
		}
		for _, id := range append([]string{p.MessageID}, p.MessageIDs...) {
			if id != "" && id != e.MessageID && !slices.Contains(e.MessageIDs, id) {
				lt.viol = append(lt.viol, fmt.Sprintf("after %s at %s the ledger's record lost message %s", after, at(lt.sc, now), id))
			}
		}
	}
	lt.record = &e
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
