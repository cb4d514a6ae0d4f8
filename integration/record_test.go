package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/temporalproto"
	"go.temporal.io/sdk/client"

	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/provider"
)

// TestRecordHistories writes the histories that workflows/replay_test.go
// replays on every run. It records only when asked:
//
//	SMSORCH_RECORD_HISTORY=1 go test ./integration -run TestRecordHistories
//
// Histories recorded before a versioned change (the files without a
// version prefix were recorded before versionNoSilentDuplicates, "v1-"
// after it) are kept and never recorded again: they are the runs in
// flight that every later build must still replay. Record new paths, and
// never to silence a determinism failure.
func TestRecordHistories(t *testing.T) {
	if os.Getenv("SMSORCH_RECORD_HISTORY") == "" {
		t.Skip("set SMSORCH_RECORD_HISTORY=1 to record workflow histories into workflows/testdata")
	}
	ctx := context.Background()
	dir := filepath.Join("..", "workflows", "testdata")
	require.NoError(t, os.MkdirAll(dir, 0o755))

	// The provider down past the window, reconciliation, a refused signal,
	// a resend decision, a new key, delivery.
	down := downPastTheWindow(t, provider.Bird)
	require.NoError(t, stack.Client.SignalWorkflow(ctx, down.Key, "", contract.SignalResend, decision(down.Key, map[string]any{"reason": "no by"})))
	require.NoError(t, stack.Client.SignalWorkflow(ctx, down.Key, "", contract.SignalResend, decision(down.Key, map[string]any{"reason": "customer called", "by": "alice"})))
	_, err := result(t, stack.Client.GetWorkflow(ctx, down.Key, ""))
	require.NoError(t, err)
	save(t, dir, "v1-down-reconcile-resend.json", down.Key)

	// The paths versionNoSilentDuplicates added or changed, each recorded
	// under a name that says what it shows.
	for _, rec := range []struct {
		name string
		run  func(t *testing.T) string // returns the key, after the run ended
	}{
		{"v1-dropped-answer-replayed.json", func(t *testing.T) string {
			in := input(provider.Bird, newKey("shipped"))
			fault(t, simulator.Fault{Kind: simulator.DropAfterCommit, Provider: "bird", Key: in.Key})
			return finished(t, in)
		}},
		{"v1-hung-attempt-duplicate-found.json", func(t *testing.T) string {
			in := input(provider.Bird, newKey("shipped"))
			fault(t, simulator.Fault{Kind: simulator.LockExpiry, Provider: "bird", Key: in.Key, Delay: simulator.Duration(4 * time.Second)})
			return finished(t, in)
		}},
		{"v1-last-attempt-collects-stored-answer.json", func(t *testing.T) string {
			in := input(provider.Sendy, newKey("shipped"))
			fault(t, simulator.Fault{Kind: simulator.Hang, Provider: "sendy", Key: in.Key, Delay: simulator.Duration(2 * time.Second)})
			fault(t, simulator.Fault{Kind: simulator.RateLimit, Provider: "sendy", Key: in.Key, Delay: simulator.Duration(30 * time.Second)})
			return finished(t, in)
		}},
		{"v1-failed-delivery-then-resend.json", func(t *testing.T) string {
			return failedThenResent(t)
		}},
		{"v1-blind-resend-forced.json", func(t *testing.T) string {
			in := downPastTheWindow(t, provider.Sendy)
			require.NoError(t, stack.Client.SignalWorkflow(ctx, in.Key, "", contract.SignalResend, decision(in.Key, map[string]any{"reason": "not forced", "by": "carol"})))
			require.NoError(t, stack.Client.SignalWorkflow(ctx, in.Key, "", contract.SignalResend, decision(in.Key, map[string]any{"reason": "customer confirmed", "by": "carol", "force": true})))
			return ended(t, in.Key)
		}},
		{"v1-cancel-by-update.json", func(t *testing.T) string {
			in := downPastTheWindow(t, provider.Bird)
			h, err := stack.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
				WorkflowID: in.Key, UpdateName: contract.UpdateDecide, WaitForStage: client.WorkflowUpdateStageCompleted,
				Args: []any{contract.Decision{Action: contract.ActionCancel, Reason: "order cancelled", By: "dave", Key: in.Key, ID: uuid.NewString()}},
			})
			require.NoError(t, err)
			require.NoError(t, h.Get(ctx, nil))
			return ended(t, in.Key)
		}},
		{"v2-resend-waits-for-a-hung-attempt.json", func(t *testing.T) string {
			return ended(t, resendWhileAHungAttemptLands(t).Key)
		}},
		{"v2-dropped-answer-replayed.json", func(t *testing.T) string {
			in := input(provider.Bird, newKey("shipped"))
			fault(t, simulator.Fault{Kind: simulator.DropAfterCommit, Provider: "bird", Key: in.Key})
			return finished(t, in)
		}},
		// versionProviderQueues: sends and lookups on the provider's queues.
		{"v3-sendy-provider-queues-delivered.json", func(t *testing.T) string {
			in := input(provider.Sendy, newKey("shipped"))
			fault(t, simulator.Fault{Kind: simulator.DropAfterCommit, Provider: "sendy", Key: in.Key})
			return finished(t, in)
		}},
		{"v3-bird-down-reconcile-resend.json", func(t *testing.T) string {
			in := downPastTheWindow(t, provider.Bird)
			require.NoError(t, stack.Client.SignalWorkflow(ctx, in.Key, "", contract.SignalResend, decision(in.Key, map[string]any{"reason": "customer called", "by": "erin"})))
			return ended(t, in.Key)
		}},
		// versionLeanHistory: ledger steps as local activities, delivery
		// tracked by one Status activity retried until final.
		{"v4-bird-delivered-lean.json", func(t *testing.T) string {
			return finished(t, input(provider.Bird, newKey("shipped")))
		}},
		{"v4-failed-delivery-then-resend.json", func(t *testing.T) string {
			return failedThenResent(t)
		}},
		{"v4-sendy-down-reconcile-cancel.json", func(t *testing.T) string {
			in := downPastTheWindow(t, provider.Sendy)
			require.NoError(t, stack.Client.SignalWorkflow(ctx, in.Key, "", contract.SignalCancel, decision(in.Key, map[string]any{"reason": "customer ordered again", "by": "erin"})))
			return ended(t, in.Key)
		}},
		// versionFailover: a move to the fallback provider on proof, no move
		// without it, and a resend decided at another provider.
		{"v5-bird-unavailable-failover-to-sendy.json", func(t *testing.T) string {
			in := withFallback(provider.Bird, newKey("shipped"))
			fault(t, simulator.Fault{Kind: simulator.Unavailable, Provider: "bird", Key: in.Key, Rate: 1})
			return finished(t, in)
		}},
		{"v5-sendy-uncertain-no-failover-cancel.json", func(t *testing.T) string {
			in := withFallback(provider.Sendy, newKey("shipped"))
			fault(t, simulator.Fault{Kind: simulator.Hang, Provider: "sendy", Key: in.Key, Count: 1, Delay: simulator.Duration(2 * time.Second)})
			fault(t, simulator.Fault{Kind: simulator.Unavailable, Provider: "sendy", Key: in.Key, Rate: 1})
			_, err := start(ctx, in)
			require.NoError(t, err)
			awaitState(t, in.Key, contract.AwaitingDecision, 45*time.Second)
			require.NoError(t, stack.Client.SignalWorkflow(ctx, in.Key, "", contract.SignalCancel, decision(in.Key, map[string]any{"reason": "sent by hand", "by": "frank"})))
			return ended(t, in.Key)
		}},
		{"v5-decided-resend-at-sendy.json", func(t *testing.T) string {
			in := downPastTheWindow(t, provider.Bird)
			require.NoError(t, stack.Client.SignalWorkflow(ctx, in.Key, "", contract.SignalResend, decision(in.Key, map[string]any{"reason": "Bird is down", "by": "gina", "provider": "sendy"})))
			return ended(t, in.Key)
		}},
		// versionNothingForgotten: a 401 after an unknown attempt searches
		// first; a reset run takes its event over; a cancel while the
		// outcome is unknown says so.
		{"v6-bird-delivered.json", func(t *testing.T) string {
			return finished(t, input(provider.Bird, newKey("shipped")))
		}},
		{"v6-bird-unknown-then-401-found.json", func(t *testing.T) string {
			return finished(t, unknownThen401(t, provider.Bird))
		}},
		{"v6-reset-while-awaiting-then-resend.json", func(t *testing.T) string {
			return resetWhileAwaiting(t)
		}},
		{"v6-sendy-down-cancel-outcome-unknown.json", func(t *testing.T) string {
			in := downPastTheWindow(t, provider.Sendy)
			require.NoError(t, stack.Client.SignalWorkflow(ctx, in.Key, "", contract.SignalCancel, decision(in.Key, map[string]any{"reason": "sent by hand", "by": "pia"})))
			return ended(t, in.Key)
		}},
		// versionLedgerMessages: a run that resumes the event knows the
		// messages the ledger holds, and a refusal searches for them.
		{"v7-bird-delivered.json", func(t *testing.T) string {
			return finished(t, input(provider.Bird, newKey("shipped")))
		}},
		{"v7-reset-then-401-follows-the-earlier-message.json", func(t *testing.T) string {
			in, newRun := resetThen401(t)
			_, _ = resultWithin(t, stack.Client.GetWorkflow(ctx, in.Key, newRun), 2*time.Minute)
			return in.Key
		}},
		// versionBoundDecisions: decisions that name no event, name
		// another, or copy one the run applied are refused in the
		// timeline; the run's own decisions apply.
		{"v8-copied-decisions-refused-then-resend.json", func(t *testing.T) string {
			in := downPastTheWindow(t, provider.Bird)
			signal := func(name string, d map[string]any) {
				require.NoError(t, stack.Client.SignalWorkflow(ctx, in.Key, "", name, d))
			}
			signal(contract.SignalResend, map[string]any{"reason": "unbound", "by": "mallory", "force": true})
			signal(contract.SignalResend, map[string]any{"reason": "another event's", "by": "mallory", "force": true, "key": "order-1-shipped", "id": "ticket-9"})
			signal(contract.SignalResend, map[string]any{"reason": "customer called", "by": "alice", "key": in.Key, "id": "ticket-1"})
			signal(contract.SignalResend, map[string]any{"reason": "customer called", "by": "alice", "key": in.Key, "id": "ticket-1"})
			return ended(t, in.Key)
		}},
		{"v8-cancel-by-update.json", func(t *testing.T) string {
			in := downPastTheWindow(t, provider.Sendy)
			h, err := stack.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
				WorkflowID: in.Key, UpdateName: contract.UpdateDecide, WaitForStage: client.WorkflowUpdateStageCompleted,
				Args: []any{contract.Decision{Action: contract.ActionCancel, Reason: "order cancelled", By: "dave", Key: in.Key, ID: "ticket-2"}},
			})
			require.NoError(t, err)
			require.NoError(t, h.Get(ctx, nil))
			return ended(t, in.Key)
		}},
		// versionFirstWaitInLookup: the wait before the first lookup is
		// the lookup activity's first attempt where lookups are not
		// paced (Bird here), and still a timer where they are (Sendy).
		{"v9-bird-delivered.json", func(t *testing.T) string {
			return finished(t, input(provider.Bird, newKey("shipped")))
		}},
		{"v9-sendy-paced-delivered.json", func(t *testing.T) string {
			return finished(t, input(provider.Sendy, newKey("shipped")))
		}},
		{"v9-failed-delivery-then-resend.json", func(t *testing.T) string {
			return failedThenResent(t)
		}},
		// versionOneProviderQueue: a provider's activities on its one
		// queue, by priority (searches, sends, lookups).
		{"v10-bird-delivered.json", func(t *testing.T) string {
			return finished(t, input(provider.Bird, newKey("shipped")))
		}},
		{"v10-sendy-paced-delivered.json", func(t *testing.T) string {
			return finished(t, input(provider.Sendy, newKey("shipped")))
		}},
		{"v10-bird-down-reconcile-resend.json", func(t *testing.T) string {
			in := downPastTheWindow(t, provider.Bird)
			require.NoError(t, stack.Client.SignalWorkflow(ctx, in.Key, "", contract.SignalResend, decision(in.Key, map[string]any{"reason": "customer called", "by": "alice"})))
			return ended(t, in.Key)
		}},
		{"v1-temporal-cancellation.json", func(t *testing.T) string {
			in := downPastTheWindow(t, provider.Bird)
			require.NoError(t, stack.Client.CancelWorkflow(ctx, in.Key, ""))
			return ended(t, in.Key)
		}},
	} {
		t.Run(rec.name, func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(dir, rec.name)); err == nil {
				t.Skipf("%s exists: kept as recorded, not run again", rec.name)
			}
			save(t, dir, rec.name, rec.run(t))
		})
	}
}

// failedThenResent runs an event whose message fails, resent by a
// decision, and returns its key once the run ended.
func failedThenResent(t *testing.T) string {
	in := input(provider.Bird, newKey("shipped"))
	fault(t, simulator.Fault{Kind: simulator.FailDelivery, Provider: "bird", Key: in.Key})
	_, err := start(context.Background(), in)
	require.NoError(t, err)
	awaitState(t, in.Key, contract.AwaitingDecision, 30*time.Second)
	require.NoError(t, stack.Client.SignalWorkflow(context.Background(), in.Key, "", contract.SignalResend, decision(in.Key, map[string]any{"reason": "the phone was off", "by": "ivy"})))
	return ended(t, in.Key)
}

// decision is a decision's payload as smsctl signals it: bound to the
// event, with an id of its own.
func decision(key string, fields map[string]any) map[string]any {
	fields["key"], fields["id"] = key, uuid.NewString()
	return fields
}

// finished starts the event and waits for its run to end.
func finished(t *testing.T, in contract.Input) string {
	t.Helper()
	_, err := start(context.Background(), in)
	require.NoError(t, err)
	return ended(t, in.Key)
}

// ended waits for the run of key to end, whatever way.
func ended(t *testing.T, key string) string {
	t.Helper()
	_, _ = result(t, stack.Client.GetWorkflow(context.Background(), key, ""))
	return key
}

// save writes a run's history, unless the file exists: a recorded history
// stands for runs in flight and is never recorded again.
func save(t *testing.T, dir, name, id string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
		t.Logf("%s exists: kept as recorded", name)
		return
	}
	it := stack.Client.GetWorkflowHistory(context.Background(), id, "", false, 0)
	var h historypb.History
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		h.Events = append(h.Events, ev)
	}
	b, err := temporalproto.CustomJSONMarshalOptions{Indent: "  "}.Marshal(&h)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	t.Logf("recorded %d events of %s into %s", len(h.Events), id, name)
}
