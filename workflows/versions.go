package workflows

import "go.temporal.io/sdk/workflow"

// SendSMS's versions. Release 1.0.0 (docs/CHANGELOG.md) is the baseline:
// its code has one path, and its runs record no version marker, so they
// replay as workflow.DefaultVersion. From 1.0.0 on, every change to what
// SendSMS does that a run in flight may meet goes behind
// workflow.GetVersion, as follows (docs/design.md, "Versions"):
//
//   - add a constant versionX (1 for the first change) below, with a
//     comment that says what it changes, and make it latestVersion;
//   - each branch reads r.since(versionX); since reads the run's
//     version once, at the first branch a run meets, with
//     workflow.GetVersion(ctx, changeID, minSupportedVersion,
//     latestVersion), so a run that meets no changed path records no
//     marker and its history keeps 1.0.0's shape (a delivered run: no
//     marker, no TemporalChangeVersion upsert). The first branch fixes
//     the run's version: the latest where the run meets it live, 1.0.0's
//     where it meets it in replay with no marker (a run that passed that
//     point under older code, which had no branch there);
//   - record the paths it changes into workflows/testdata under the
//     prefix "vX-" (SMSORCH_RECORD_HISTORY=1 go test ./integration -run
//     TestRecordHistories), keeping every history recorded before;
//   - say it in docs/CHANGELOG.md.
//
// Retiring version N (raising minSupportedVersion to N+1) is allowed
// once every run that started before version N+1 reached every worker
// has closed and left retention: N+1's deploy, plus the longest a run
// lives (the replay windows, the decision deadline of 72 h, the tracking
// limit of 24 h, and the reconciliation retries between them), plus the
// namespace's retention (30 days), since a query of a closed run replays
// it. Then, in one change: raise minSupportedVersion, delete every
// since(vK) branch with K <= N as always true, and delete the histories
// of those versions from testdata. TestVersionsRetireWholly fails on any
// of them left, and on a version without a recorded history.
const (
	// changeID is the one change id of SendSMS's versions.
	changeID = "sendsms"
	// versionLedgerAnswer (1.1.0): a search that fails no longer leaves
	// the outcome unknown where the ledger holds the provider's accepted
	// answer to an attempt under the run's current key (another run of the
	// workflow made it, before a reset, and the run never saw its status):
	// the provider took the SMS, so the run follows that message as its
	// own accepted send, instead of awaiting a decision and, on a
	// cancellation, ending Cancelled.
	versionLedgerAnswer workflow.Version = 1
	// latestVersion is what new runs follow.
	latestVersion = versionLedgerAnswer
	// minSupportedVersion is the oldest version a run of which may still
	// exist.
	minSupportedVersion = workflow.DefaultVersion
)
