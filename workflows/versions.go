package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"
)

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
	// versionNothingForgotten: an uncertain attempt keeps its weight
	// whatever follows it. The ledger, not the activity's end, says
	// whether a send began (one that never left the task queue sent
	// nothing, and its key's window starts with its first attempt) and
	// whether an attempt may still take effect, which arms the late look
	// even when every search failed; a rejection after an uncertain
	// attempt searches before the run ends. An acknowledged resend that
	// waits for a search is carried out once one succeeds. More than one
	// live message of the event, under any keys, is a duplicate; a run
	// that moved looks once more at the provider it left; searches give a
	// provider only its own message ids, and an id of ours it cannot
	// find is an unknown outcome. A run that finds another run of its
	// workflow holding the event (a Temporal reset) takes it over with
	// every key the ledger holds, and the settle refuses keys the run
	// does not know. A final status in the accepting answer is taken as
	// such; a run ends Unconfirmed (not Accepted) when it cannot confirm
	// delivery, and a Cancelled or Failed run whose attempts no search
	// could resolve says that an SMS may have gone out.
	versionNothingForgotten workflow.Version = 6
	// versionLedgerMessages: a run that resumes or takes over the event,
	// or learns from the ledger the keys another run of its workflow
	// used, also learns the message ids the ledger holds, so its result
	// lists every message of the event; a refusal while the ledger holds
	// a message of the event searches for it (a run a reset made may have
	// been refused where the run it replaced was accepted) instead of
	// ending Failed; and a settle that finds the event settled by another
	// run of the workflow ends in that outcome, with what this run found
	// in the reason, so the result and the ledger agree. The
	// deterministic simulation (simulation/) found all three.
	versionLedgerMessages workflow.Version = 7
	// versionBoundDecisions: a decision by signal or update names the
	// event it is for ("key", the workflow id) and carries an id of its
	// own ("id"), and a run acts on each id once (a signal's id is spent
	// even when the signal is refused): a decision copied from one run's
	// history, sealed or not, is refused by another run and by the same
	// run later. A Temporal cancellation request is not a copy
	// and needs neither.
	versionBoundDecisions workflow.Version = 8
	// versionFirstWaitInLookup: the wait before the first status lookup
	// is the lookup activity's first attempt (StatusInput.FirstWait, a
	// retry delay) where the provider's lookups are not paced, so the
	// lookups are scheduled in the workflow task that records the
	// acceptance: a delivered run is three workflow tasks and no timer
	// instead of four and a timer. The lookups keep their schedule.
	versionFirstWaitInLookup workflow.Version = 9
	// versionOneProviderQueue: a provider's activities (sends, status
	// lookups, searches) run on one task queue of the provider
	// (contract.ProviderQueue) under one fleet-wide rate limit, ordered
	// by task priority: searches, then sends, then lookups. Sends use
	// what searches leave, and a backlog of lookups never holds a send
	// back, where before each purpose had a fixed share of the limit.
	versionOneProviderQueue workflow.Version = 10
	// latestVersion is what new runs follow.
	latestVersion = versionOneProviderQueue

	// minSupportedVersion is the oldest version a run of which may still
	// exist. Retiring version N (raising this to N+1) is allowed once
	// every run that started before version N+1 reached every worker has
	// closed and left retention: N+1's deploy, plus the longest a run
	// lives (the replay windows, the decision deadline of 72 h, the
	// tracking limit of 24 h, and the reconciliation retries between
	// them), plus the namespace's retention (30 days), since a query of a
	// closed run replays it. Then, in one change: raise this constant,
	// delete every since(vK) branch with K <= N as always true (the code
	// of vK and older goes), and delete the histories of those versions
	// from testdata. TestVersionsRetireWholly fails on any of them left.
	minSupportedVersion = workflow.DefaultVersion
)

// VersionChange and LatestVersion name SendSMS's versioning for code
// outside the package: the deterministic simulation pins new runs to an
// earlier version to show what a later one fixed.
const (
	VersionChange         = changeNoSilentDuplicates
	LatestVersion         = latestVersion
	VersionBoundDecisions = versionBoundDecisions
)

// OldProviderQueueVersions are the values of the search attribute
// TemporalChangeVersion (the SDK's, "change-version") of runs that put
// a provider's activities on its queues of one purpose each
// (contract.ProviderTaskQueue): versions from versionProviderQueues up
// to versionOneProviderQueue. Workers poll those queues while such a
// run is open.
func OldProviderQueueVersions() []string {
	var out []string
	for v := versionProviderQueues; v < versionOneProviderQueue; v++ {
		out = append(out, fmt.Sprintf("%s-%d", changeNoSilentDuplicates, v))
	}
	return out
}
