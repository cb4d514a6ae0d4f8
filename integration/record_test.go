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
// The files without a version prefix are SendSMS 1.0.0's baseline
// (docs/CHANGELOG.md), one for each path a run can take; a change after
// 1.0.0 records the paths it changes under "vN-" (workflows/versions.go).
// A recorded history stands for runs in flight: it is kept and never
// recorded again, and never to silence a determinism failure.
func TestRecordHistories(t *testing.T) {
	if os.Getenv("SMSORCH_RECORD_HISTORY") == "" {
		t.Skip("set SMSORCH_RECORD_HISTORY=1 to record workflow histories into workflows/testdata")
	}
	ctx := context.Background()
	dir := filepath.Join("..", "workflows", "testdata")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	signal := func(key, name string, d map[string]any) {
		require.NoError(t, stack.Client.SignalWorkflow(ctx, key, "", name, d))
	}
	update := func(key string, d contract.Decision) {
		h, err := stack.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID: key, UpdateName: contract.UpdateDecide, WaitForStage: client.WorkflowUpdateStageCompleted, Args: []any{d},
		})
		require.NoError(t, err)
		require.NoError(t, h.Get(ctx, nil))
	}
	for _, rec := range []struct {
		name string
		run  func(t *testing.T) string // returns the key, after the run ended
	}{
		// Delivered at each provider: Bird's Send looks its message up
		// first and settles it, Sendy's lookups are paced by a timer.
		{"bird-delivered.json", func(t *testing.T) string {
			return finished(t, input(provider.Bird, newKey("shipped")))
		}},
		// Bird's first look finds the message not delivered yet: the
		// run tracks it and settles itself.
		{"bird-delivered-after-the-first-look.json", func(t *testing.T) string {
			in := input(provider.Bird, newKey("shipped"))
			fault(t, simulator.Fault{Kind: simulator.SlowDelivery, Provider: "bird", Key: in.Key, Delay: simulator.Duration(2 * time.Second)})
			return finished(t, in)
		}},
		{"sendy-paced-delivered.json", func(t *testing.T) string {
			return finished(t, input(provider.Sendy, newKey("shipped")))
		}},
		// An answer lost after the provider stored it, replayed.
		{"bird-dropped-answer-replayed.json", func(t *testing.T) string {
			in := input(provider.Bird, newKey("shipped"))
			fault(t, simulator.Fault{Kind: simulator.DropAfterCommit, Provider: "bird", Key: in.Key})
			return finished(t, in)
		}},
		// A hung attempt whose lock expired: two messages, found.
		{"bird-hung-attempt-duplicate-found.json", func(t *testing.T) string {
			in := input(provider.Bird, newKey("shipped"))
			fault(t, simulator.Fault{Kind: simulator.LockExpiry, Provider: "bird", Key: in.Key, Delay: simulator.Duration(4 * time.Second)})
			return finished(t, in)
		}},
		// The provider down past the window: reconciliation, a refused
		// signal, a resend decision, a new key, delivery.
		{"bird-down-reconcile-resend.json", func(t *testing.T) string {
			in := downPastTheWindow(t, provider.Bird)
			signal(in.Key, contract.SignalResend, decision(in.Key, map[string]any{"reason": "no by"}))
			signal(in.Key, contract.SignalResend, decision(in.Key, map[string]any{"reason": "customer called", "by": "alice"}))
			return ended(t, in.Key)
		}},
		// A resend that is not forced is refused where the records cannot
		// speak; a forced one is sent blind and flagged.
		{"sendy-down-forced-resend.json", func(t *testing.T) string {
			in := downPastTheWindow(t, provider.Sendy)
			signal(in.Key, contract.SignalResend, decision(in.Key, map[string]any{"reason": "not forced", "by": "carol"}))
			signal(in.Key, contract.SignalResend, decision(in.Key, map[string]any{"reason": "customer confirmed", "by": "carol", "force": true}))
			return ended(t, in.Key)
		}},
		// Cancel by signal, with the outcome unknown; cancel by update.
		{"sendy-down-cancel-by-signal-outcome-unknown.json", func(t *testing.T) string {
			in := downPastTheWindow(t, provider.Sendy)
			signal(in.Key, contract.SignalCancel, decision(in.Key, map[string]any{"reason": "sent by hand", "by": "pia"}))
			return ended(t, in.Key)
		}},
		{"bird-down-cancel-by-update.json", func(t *testing.T) string {
			in := downPastTheWindow(t, provider.Bird)
			update(in.Key, contract.Decision{Action: contract.ActionCancel, Reason: "order cancelled", By: "dave", Key: in.Key, ID: uuid.NewString()})
			return ended(t, in.Key)
		}},
		// A Temporal cancellation request is a cancel decision.
		{"bird-down-temporal-cancellation.json", func(t *testing.T) string {
			in := downPastTheWindow(t, provider.Bird)
			require.NoError(t, stack.Client.CancelWorkflow(ctx, in.Key, ""))
			return ended(t, in.Key)
		}},
		// Decisions that name no event, name another, or copy one the run
		// applied are refused in the timeline; the run's own applies.
		{"copied-decisions-refused-then-resend.json", func(t *testing.T) string {
			in := downPastTheWindow(t, provider.Bird)
			signal(in.Key, contract.SignalResend, map[string]any{"reason": "unbound", "by": "mallory", "force": true})
			signal(in.Key, contract.SignalResend, map[string]any{"reason": "another event's", "by": "mallory", "force": true, "key": "order-1-shipped", "id": "ticket-9"})
			signal(in.Key, contract.SignalResend, map[string]any{"reason": "customer called", "by": "alice", "key": in.Key, "id": "ticket-1"})
			signal(in.Key, contract.SignalResend, map[string]any{"reason": "customer called", "by": "alice", "key": in.Key, "id": "ticket-1"})
			return ended(t, in.Key)
		}},
		// The message fails; a resend inside the window needs no search.
		{"bird-failed-delivery-then-resend.json", func(t *testing.T) string {
			return failedThenResent(t)
		}},
		// A move to the fallback on proof, and a resend decided at another
		// provider.
		{"bird-unavailable-failover-to-sendy.json", func(t *testing.T) string {
			in := withFallback(provider.Bird, newKey("shipped"))
			fault(t, simulator.Fault{Kind: simulator.Unavailable, Provider: "bird", Key: in.Key, Rate: 1})
			return finished(t, in)
		}},
		{"bird-down-resend-decided-at-sendy.json", func(t *testing.T) string {
			in := downPastTheWindow(t, provider.Bird)
			signal(in.Key, contract.SignalResend, decision(in.Key, map[string]any{"reason": "Bird is down", "by": "gina", "provider": "sendy"}))
			return ended(t, in.Key)
		}},
		// A 401 after an attempt without a certain answer searches first
		// (recorded on the shared stack, whose history this test saves).
		{"bird-unknown-then-401-found.json", func(t *testing.T) string {
			return finished(t, unknownThen401Input(t, provider.Bird, sim()))
		}},
		// A Temporal reset: the new run takes the event over.
		{"reset-while-awaiting-then-resend.json", func(t *testing.T) string {
			return resetWhileAwaiting(t)
		}},
		{"reset-then-401-follows-the-earlier-message.json", func(t *testing.T) string {
			in, newRun := resetThen401(t)
			_, _ = resultWithin(t, stack.Client.GetWorkflow(ctx, in.Key, newRun), 2*time.Minute)
			return in.Key
		}},
		// SendSMS version 1 (versionLedgerAnswer): a reset run whose
		// search fails follows the message the ledger says the provider
		// accepted. Only a run that meets the branch records the marker.
		{"v1-reset-searches-down-follows-the-ledgers-answer.json", func(t *testing.T) string {
			in, newRun := resetThenLookupsDown(t, stack) // the recording runs alone
			_, _ = resultWithin(t, stack.Client.GetWorkflow(ctx, in.Key, newRun), 2*time.Minute)
			return in.Key
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
