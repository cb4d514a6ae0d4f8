package workflows

import "go.temporal.io/sdk/workflow"

// Changes to SendSMS that runs in flight may meet, each behind
// workflow.GetVersion: a run that started before a change keeps the
// behaviour it started with, so its history replays unchanged
// (workflows/testdata holds recorded histories of both).
const (
	// changeNoSilentDuplicates: follow uncertain attempts to their end
	// (look again after the late-effect horizon and before settling, one
	// last same-key attempt before the window closes), no resend past the
	// window without a reconciliation that succeeded unless forced, leave
	// AwaitingDecision before anything yields, resume every key an
	// earlier run used, and a settle that must be written.
	changeNoSilentDuplicates = "no-silent-duplicates"
)

// Versions of changeNoSilentDuplicates.
const (
	// versionNoSilentDuplicates introduced the change.
	versionNoSilentDuplicates workflow.Version = 1
	// versionLateEffectFirst: a resend of a failed message waits for an
	// uncertain attempt that may still land, and searches first; a live
	// message found by the look before settling turns a Cancelled or
	// Failed run into Accepted.
	versionLateEffectFirst workflow.Version = 2
	// versionProviderQueues: the activities that call a provider run on
	// that provider's task queues (ProviderTaskQueue), sends and lookups
	// apart, where the workers' fleet-wide rate limits hold them to the
	// provider's request limit.
	versionProviderQueues workflow.Version = 3
	// versionLeanHistory: the ledger steps (Prepare, Plan, Settle) run as
	// local activities in the workflow task that needs them; delivery is
	// tracked by one Status activity whose retries are the polling
	// schedule (no workflow task per lookup); a search attribute is
	// upserted only when its value changes. 28 history events for a delivered
	// run instead of 40 (integration/send_test.go measures it).
	versionLeanHistory workflow.Version = 4
	// versionFailover: a run with a fallback provider moves to it, under
	// the key keys.Via(event, fallback), when the first provider's records
	// prove that it holds no message of the event: every attempt was
	// answered without executing, or a search by key past the window and
	// the late-effect horizon found none. A resend may name a provider.
	// Searches cover the keys of the provider in use.
	versionFailover workflow.Version = 5
	// latestVersion is what new runs follow.
	latestVersion = versionFailover
)
