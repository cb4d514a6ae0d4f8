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
//   - setup() reads the run's version once, at its first moment:
//     r.v = workflow.GetVersion(ctx, changeID, minSupportedVersion,
//     latestVersion), and each branch reads r.since(versionX);
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
	// latestVersion is what new runs follow: 1.0.0's baseline until the
	// first change after it.
	latestVersion = workflow.DefaultVersion
	// minSupportedVersion is the oldest version a run of which may still
	// exist.
	minSupportedVersion = workflow.DefaultVersion
)
