package integration

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
)

var both = []provider.Name{provider.Bird, provider.Sendy}

func TestOneEventStartedTenTimesSendsOnce(t *testing.T) {
	t.Parallel()
	for _, p := range both {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			in := input(p, newKey("shipped"))
			runs := make([]client.WorkflowRun, 5)
			var wg sync.WaitGroup
			for i := range runs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					run, err := start(ctx, in)
					require.NoError(t, err)
					runs[i] = run
				}()
			}
			wg.Wait()
			for _, r := range runs {
				require.Equal(t, runs[0].GetRunID(), r.GetRunID(), "concurrent starts join one run")
			}
			res, err := result(t, runs[0])
			require.NoError(t, err)
			require.Equal(t, contract.Delivered, res.State)

			for i := 0; i < 5; i++ {
				_, err := start(ctx, in)
				require.True(t, isAlreadyStarted(err), "a start after completion is refused: %v", err)
			}
			require.Len(t, messages(p, in.Key), 1)
		})
	}
}

func TestDroppedAnswerIsReplayed(t *testing.T) {
	t.Parallel()
	for _, p := range both {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			in := input(p, newKey("shipped"))
			fault(t, simulator.Fault{Kind: simulator.DropAfterCommit, Provider: string(p), Key: in.Key})
			run, err := start(context.Background(), in)
			require.NoError(t, err)
			res, err := result(t, run)
			require.NoError(t, err)
			require.Equal(t, contract.Delivered, res.State)
			require.Equal(t, 1, res.Replays, "the replay is visible in the result")
			require.Equal(t, 2, res.Attempts)
			msgs := messages(p, in.Key)
			require.Len(t, msgs, 1)
			require.Equal(t, []string{msgs[0].ID}, res.MessageIDs)
			requireSameBytes(t, p, in.Key)
		})
	}
}

// requireSameBytes checks the simulator's record of every send attempt
// under a key: the same body bytes each time.
func requireSameBytes(t *testing.T, p provider.Name, key string) {
	t.Helper()
	requireSameBytesAt(t, sim(), p, key)
}

// requireSameBytesAt is requireSameBytes at another stack's simulator.
func requireSameBytesAt(t *testing.T, s *simulator.Listening, p provider.Name, key string) {
	t.Helper()
	var first []byte
	n := 0
	for _, r := range s.Requests(simulator.Filter{Provider: string(p), Key: key}) {
		if r.Method != http.MethodPost {
			continue
		}
		n++
		if first == nil {
			first = r.Body
		}
		require.True(t, bytes.Equal(first, r.Body), "attempt %d sent other bytes", r.Seq)
	}
	require.Positive(t, n)
}

func TestTransientAnswersThenSuccessSendOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p    provider.Name
		kind simulator.Kind
	}{
		{provider.Bird, simulator.Unavailable}, // 503 E01033
		{provider.Bird, simulator.InProgress},  // 409 E01004
		{provider.Bird, simulator.Error5xx},
		{provider.Sendy, simulator.Error5xx},
	} {
		t.Run(string(tc.p)+"/"+string(tc.kind), func(t *testing.T) {
			t.Parallel()
			in := input(tc.p, newKey("shipped"))
			fault(t, simulator.Fault{Kind: tc.kind, Provider: string(tc.p), Key: in.Key})
			run, err := start(context.Background(), in)
			require.NoError(t, err)
			res, err := result(t, run)
			require.NoError(t, err)
			require.Equal(t, contract.Delivered, res.State)
			require.Equal(t, 2, res.Attempts)
			require.Len(t, messages(tc.p, in.Key), 1)
			requireSameBytes(t, tc.p, in.Key)
		})
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	for _, p := range both {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			in := input(p, newKey("shipped"))
			fault(t, simulator.Fault{Kind: simulator.RateLimit, Provider: string(p), Key: in.Key, Delay: simulator.Duration(2 * time.Second)})
			run, err := start(context.Background(), in)
			require.NoError(t, err)
			res, err := result(t, run)
			require.NoError(t, err)
			require.Equal(t, contract.Delivered, res.State)
			var sends []simulator.Request
			for _, r := range sim().Requests(simulator.Filter{Provider: string(p), Key: in.Key}) {
				if r.Method == http.MethodPost {
					sends = append(sends, r)
				}
			}
			require.Len(t, sends, 2)
			require.Equal(t, http.StatusTooManyRequests, sends[0].Status)
			gap := sends[1].At.Sub(sends[0].At)
			require.GreaterOrEqual(t, gap, 1900*time.Millisecond, "the retry waited for Retry-After: 2 (backoff alone is 200 ms)")
			require.Len(t, messages(p, in.Key), 1)
		})
	}
}

// Another request already holds the key: Bird answers E01005 (different
// bytes), Sendy IDEMPOTENCY_CONFLICT (different text). The run fails with
// that reason after one attempt.
func TestKeyConflictFailsTheRunWithoutRetry(t *testing.T) {
	t.Parallel()
	for _, p := range both {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			in := input(p, newKey("shipped"))
			other := in
			other.Text = "Order was cancelled."
			squat(t, p, other)

			run, err := start(context.Background(), in)
			require.NoError(t, err)
			res, err := result(t, run)
			require.Error(t, err)
			require.Equal(t, contract.Failed, res.State)
			want := map[provider.Name]string{provider.Bird: "409 E01005 IdempotencyKeyReuse", provider.Sendy: "409 IDEMPOTENCY_CONFLICT"}[p]
			require.Contains(t, res.Reason, want)
			require.Equal(t, 1, res.Attempts, "not retried")
			msgs := messages(p, in.Key)
			require.Len(t, msgs, 1, "only the other request's message")
			require.Equal(t, other.Text, msgs[0].Text)
		})
	}
}

// squat sends a request under the key directly to the simulator, as
// another system with a key-assignment bug would.
func squat(t *testing.T, p provider.Name, in contract.Input) {
	t.Helper()
	var url, auth, body string
	if p == provider.Bird {
		url = sim().URL + "/workspaces/" + simulator.DevWorkspace + "/channels/" + simulator.DevChannel + "/messages"
		auth = "AccessKey " + simulator.DefaultBirdAccessKey
		body = `{"receiver":{"contacts":[{"identifierKey":"phonenumber","identifierValue":"` + in.To + `"}]},"body":{"type":"text","text":{"text":"` + in.Text + `"}}}`
	} else {
		url = sim().URL + "/api/v1/messages"
		auth = "Bearer " + simulator.DefaultSendyToken
		body = `{"to":"` + in.To + `","from":"SMS","body":"` + in.Text + `","mode":"transactional"}`
	}
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", auth)
	req.Header.Set("Idempotency-Key", in.Key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
}

// The provider stays down past the (shortened) replay window: the run
// reconciles, finds nothing and waits for a person.
func downPastTheWindow(t *testing.T, p provider.Name) contract.Input {
	t.Helper()
	in := input(p, newKey("shipped"))
	fault(t, simulator.Fault{Kind: simulator.Error5xx, Provider: string(p), Key: in.Key, Rate: 1})
	_, err := start(context.Background(), in)
	require.NoError(t, err)
	// About 11 s (the window, then the reconciliation); the bound is
	// against a hang, not a speed: on a machine loaded past its cores a
	// workflow task timed out and it took 31 s.
	s := awaitState(t, in.Key, contract.AwaitingDecision, time.Minute)
	require.Empty(t, messages(p, in.Key))
	// The window ran out with the outcome unknown: said when the last
	// same-key attempt ran, or when a busy worker reached it after the
	// window had closed (it then reconciles instead; both are correct).
	tl := timelineText(s)
	require.True(t, strings.Contains(tl, "ran out with the outcome unknown") || strings.Contains(tl, "replay window of "+in.Key+" closed"), tl)
	require.Contains(t, tl, "reconciled")
	return in
}

func timelineText(s contract.Status) string {
	var b strings.Builder
	for _, e := range s.Timeline {
		b.WriteString(e.Text + "\n")
	}
	return b.String()
}

// Bird can be searched by key, so a resend after the window follows a
// reconciliation that found nothing. Sendy cannot be searched without a
// message id: a plain resend is refused (it would be blind), and a forced
// one sends, recorded as a blind resend.
func TestProviderDownThenResendSendsOnceUnderTheResendKey(t *testing.T) {
	t.Parallel()
	for _, p := range both {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			in := downPastTheWindow(t, p)
			require.NoError(t, stack.Client.SignalWorkflow(ctx, in.Key, "", contract.SignalResend,
				decision(in.Key, map[string]any{"reason": "customer got nothing", "by": "alice"})))
			if p == provider.Sendy {
				require.Eventually(t, func() bool {
					return strings.Contains(timelineText(status(t, in.Key)), `refused a resend signal from alice: refused: sendy's records cannot be searched`)
				}, 10*time.Second, 100*time.Millisecond)
				require.Equal(t, contract.AwaitingDecision, status(t, in.Key).State)
				require.NoError(t, stack.Client.SignalWorkflow(ctx, in.Key, "", contract.SignalResend,
					decision(in.Key, map[string]any{"reason": "customer confirmed nothing arrived", "by": "alice", "force": true})))
			}
			res, err := result(t, stack.Client.GetWorkflow(ctx, in.Key, ""))
			require.NoError(t, err)
			require.Equal(t, contract.Delivered, res.State)
			resendKey := in.Key + "~resend-1"
			require.Equal(t, []string{resendKey}, res.ResendKeys)
			require.Empty(t, messages(p, in.Key))
			require.Len(t, messages(p, resendKey), 1, "exactly one new message, under the resend key")
			require.Equal(t, []string{messages(p, resendKey)[0].ID}, res.MessageIDs)
			if p == provider.Sendy {
				require.Equal(t, []string{resendKey}, res.BlindResends)
			} else {
				require.Empty(t, res.BlindResends, "Bird's records were searched first")
			}
			checkProviderQueues(t, in.Key, p)
		})
	}
}

// A hung attempt at Bird whose in-flight lock expired: the retry executes
// (a second message) and the hung attempt takes effect later. The run
// finds both when it looks again after the late-effect horizon.
func TestAHungAttemptThatTakesEffectLateIsReported(t *testing.T) {
	t.Parallel()
	in := input(provider.Bird, newKey("shipped"))
	fault(t, simulator.Fault{Kind: simulator.LockExpiry, Provider: "bird", Key: in.Key, Delay: simulator.Duration(4 * time.Second)})
	run, err := start(context.Background(), in)
	require.NoError(t, err)
	res, err := result(t, run)
	require.NoError(t, err)
	msgs := messages(provider.Bird, in.Key)
	require.Len(t, msgs, 2, "the lock expiry let the retry send while the hung attempt still ran")
	require.True(t, res.DuplicateSend, "the run reports what the provider's non-guarantee made")
	require.ElementsMatch(t, []string{msgs[0].ID, msgs[1].ID}, res.MessageIDs)
}

// A hang at Sendy stores its answer after the client gave up; a 429 with
// a long Retry-After then puts the next retry past the window. One last
// attempt with the same key before the window closes collects the stored
// answer: one message, followed to delivery, instead of "unknown".
//
// The last attempt starts one attempt timeout before the window (minus
// margin) ends, at most 5 s (activities.Policy.LastAttemptLead): a run
// whose workflow task comes later than that skips it, rightly, and asks
// a person ("no worker ran the run in time"). With the shared stack's
// 1 s attempts, a loaded machine ran that task 1.75 s late, so this test
// runs on a stack of its own whose attempts get 3 s.
func TestALastAttemptCollectsTheAnswerAHangStored(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pol := pacedPolicy
	pol.AttemptTimeout = 3 * time.Second
	pol.ReplayWindow = 16 * time.Second // room for a 3 s attempt and the activity's slack
	pol.LateEffectHorizon = activities.ProviderLockLifetime + pol.AttemptTimeout
	own := ownStack(t, pol, 12)

	in := input(provider.Sendy, newKey("shipped"))
	require.NoError(t, own.Sim.AddFault(simulator.Fault{Kind: simulator.Hang, Provider: "sendy", Key: in.Key, Delay: simulator.Duration(5 * time.Second)}))
	require.NoError(t, own.Sim.AddFault(simulator.Fault{Kind: simulator.RateLimit, Provider: "sendy", Key: in.Key, Delay: simulator.Duration(30 * time.Second)}))
	run, err := startOn(ctx, own.Client, in)
	require.NoError(t, err)
	// The run ends after the late-effect horizon of its hung attempt (33 s).
	res, err := resultOn(t, own.Client, run, 2*time.Minute)
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	msgs := own.Sim.Messages(simulator.Filter{Provider: string(provider.Sendy), Key: in.Key})
	require.Len(t, msgs, 1)
	require.Equal(t, []string{msgs[0].ID}, res.MessageIDs)
	require.Equal(t, 1, res.Replays, "the stored answer was collected by replay")
	require.Contains(t, timelineText(statusOn(t, own.Client, in.Key)), "one last attempt with the same key and bytes")
	requireSameBytesAt(t, own.Sim, provider.Sendy, in.Key)
}

func TestProviderDownThenCancelSendsNothing(t *testing.T) {
	t.Parallel()
	in := downPastTheWindow(t, provider.Bird)
	require.NoError(t, stack.Client.SignalWorkflow(context.Background(), in.Key, "", contract.SignalCancel,
		decision(in.Key, map[string]any{"reason": "order cancelled", "by": "bob"})))
	res, err := result(t, stack.Client.GetWorkflow(context.Background(), in.Key, ""))
	require.Error(t, err)
	require.Equal(t, contract.Cancelled, res.State)
	require.Equal(t, "cancelled by bob: order cancelled", res.Reason)
	require.Empty(t, sim().Messages(simulator.Filter{Key: in.Key}))
	require.Empty(t, sim().Messages(simulator.Filter{Key: in.Key + "~resend-1"}))
	e, err := stack.Ledger.Event(context.Background(), in.Key)
	require.NoError(t, err)
	require.Equal(t, "Cancelled", e.Outcome, "the ledger settles the event")
}

// The documented duplicate path: the send takes effect but the provider
// fails to store its answer; the retry sends again. The run finds both
// messages under the key and says so.
func TestUnstoredAnswerIsReportedAsADuplicateSend(t *testing.T) {
	t.Parallel()
	in := input(provider.Bird, newKey("shipped"))
	fault(t, simulator.Fault{Kind: simulator.Unstored, Provider: "bird", Key: in.Key})
	run, err := start(context.Background(), in)
	require.NoError(t, err)
	res, err := result(t, run)
	require.NoError(t, err)
	msgs := messages(provider.Bird, in.Key)
	require.Len(t, msgs, 2)
	require.True(t, res.DuplicateSend)
	require.ElementsMatch(t, []string{msgs[0].ID, msgs[1].ID}, res.MessageIDs)
	require.Contains(t, timelineText(status(t, in.Key)), "proven duplicate send: 2 accepted message ids for key "+in.Key)
}

// Temporal forgets closed runs after retention; the ledger does not. An
// event settled in the ledger, with no run left in Temporal, is not sent
// again by a new run.
func TestSettledEventIsNotSentAgainEvenByANewRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	in := input(provider.Bird, newKey("shipped"))
	_, err := stack.Ledger.Claim(ctx, ledger.Event{
		Key: in.Key, Provider: in.Provider, Recipient: in.To, Text: in.Text, RunID: "a-run-past-retention", CreatedAt: time.Now().Add(-40 * 24 * time.Hour),
	})
	require.NoError(t, err)
	_, err = stack.Ledger.Settle(ctx, in.Key, string(contract.Delivered), "delivered", "m-from-last-month", time.Now().Add(-39*24*time.Hour))
	require.NoError(t, err)

	run, err := start(ctx, in)
	require.NoError(t, err)
	res, err := result(t, run)
	require.NoError(t, err)
	require.Equal(t, contract.Duplicate, res.State)
	require.Contains(t, res.Reason, "already sent as message m-from-last-month")
	require.Empty(t, sim().Requests(simulator.Filter{Key: in.Key}), "nothing reached the provider")
}

// Bird: attempt 1 hangs with its lock expired; the retry is accepted and
// its message fails delivery at once; a resend is decided. The hung
// attempt lands meanwhile. The resend waits until the hung attempt can no
// longer take effect, searches, finds the landed message alive and
// follows it: nothing is resent.
func TestAResendWaitsForAHungAttemptToLand(t *testing.T) {
	t.Parallel()
	in := resendWhileAHungAttemptLands(t)
	res, err := result(t, stack.Client.GetWorkflow(context.Background(), in.Key, ""))
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	require.Empty(t, res.Resends, "the landed message was followed")
	require.Empty(t, messages(provider.Bird, in.Key+"~resend-1"))
	require.Len(t, messages(provider.Bird, in.Key), 2, "the failed one and the one that landed")
}

func resendWhileAHungAttemptLands(t *testing.T) contract.Input {
	t.Helper()
	in := input(provider.Bird, newKey("shipped"))
	fault(t, simulator.Fault{Kind: simulator.LockExpiry, Provider: "bird", Key: in.Key, Delay: simulator.Duration(4 * time.Second)})
	fault(t, simulator.Fault{Kind: simulator.FailDelivery, Provider: "bird", Key: in.Key})
	_, err := start(context.Background(), in)
	require.NoError(t, err)
	awaitState(t, in.Key, contract.AwaitingDecision, time.Minute) // a bound against a hang
	require.NoError(t, stack.Client.SignalWorkflow(context.Background(), in.Key, "", contract.SignalResend,
		decision(in.Key, map[string]any{"reason": "the message failed", "by": "ivy"})))
	return in
}

// checkProviderQueues reads the run's history as the server holds it:
// the provider's activities on its one queue, searches ahead of sends
// and sends ahead of status lookups, the rest on the run's own queue.
func checkProviderQueues(t *testing.T, key string, p provider.Name) {
	t.Helper()
	it := stack.Client.GetWorkflowHistory(context.Background(), key, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	seen := map[string]int{}
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		a := ev.GetActivityTaskScheduledEventAttributes()
		if a == nil {
			continue
		}
		name, queue := a.GetActivityType().GetName(), a.GetTaskQueue().GetName()
		seen[name]++
		priorities := map[string]int32{"Reconcile": contract.PrioritySearch, "Send": contract.PrioritySend, "Status": contract.PriorityLookup}
		switch name {
		case "Send", "Status", "Reconcile":
			require.Equal(t, contract.ProviderQueue(contract.TaskQueue, string(p)), queue, name)
			require.Equal(t, priorities[name], a.GetPriority().GetPriorityKey(), name)
		default:
			require.Equal(t, contract.TaskQueue, queue, name)
		}
	}
	require.Positive(t, seen["Send"])
	require.Positive(t, seen["Reconcile"])
	if p == provider.Sendy {
		// Bird's Send looks its message up first (activities.FirstLook)
		// and finds it delivered: no Status activity.
		require.Positive(t, seen["Status"])
	}
}

// A delivered run as the server holds it: the claim in the ledger is a
// local activity's marker; the Send that got the message accepted looked
// it up once (FirstLook) and, finding it delivered, settled it; the start
// set the search attributes, and only the outcome is upserted. Its shape
// is pinned: a change that grows it fails here (docs/performance.md,
// "The latest full run").
func TestADeliveredRunHasALeanHistory(t *testing.T) {
	t.Parallel()
	// Through the Go API, which sets the search attributes at the start.
	started, err := goAPI().Send(context.Background(), event(provider.Bird, uniqueID()))
	require.NoError(t, err)
	res, err := result(t, stack.Client.GetWorkflow(context.Background(), started.Key, started.RunID))
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)
	it := stack.Client.GetWorkflowHistory(context.Background(), started.Key, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	events, markers, upserts, timers, workflowTasks, tasks := 0, 0, 0, 0, 0, map[string]int{}
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		events++
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			markers++
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			upserts++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			tasks[ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()]++
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			timers++
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			workflowTasks++
		}
	}
	require.Equal(t, map[string]int{"Send": 1}, tasks, "the Send made the first lookup: no Status activity")
	require.Equal(t, 1, markers, "the claim as a local activity; the Send settled, and no version marker")
	require.Equal(t, 1, upserts, "the start set Sending, the provider and the key; only the outcome is upserted")
	require.Zero(t, timers)
	require.Equal(t, 2, workflowTasks, "the start, and the Send's completion")
	require.Equal(t, 13, events, "21 before the Send looked first and settled, 40 before the ledger steps were local activities")
	t.Logf("a delivered run: %d history events, %d workflow tasks, %d markers, %d upserts", events, workflowTasks, markers, upserts)
}
