// Package name holds the names of the orchestrator's own metrics. It
// has no dependencies, so workflow code can name a metric without
// importing the exporter.
package name

// The orchestrator's metrics. Counters get _total in Prometheus
// (smsorch_sends_total).
const (
	// Sends counts send attempts by provider and outcome class
	// (accepted, replayed, in_progress, not_executed, unknown,
	// rate_limited, rejected).
	Sends = "smsorch_sends"
	// Replays counts answers the provider replayed for a key it had seen.
	Replays = "smsorch_replays"
	// Conflicts counts keys the provider refused as used for another message.
	Conflicts = "smsorch_key_conflicts"
	// Reconciliations counts searches of the provider's records by result
	// (found, none, unsearchable, failed).
	Reconciliations = "smsorch_reconciliations"
	// Decisions counts decisions taken by action (resend, cancel) and forced.
	Decisions = "smsorch_decisions"
	// Duplicates counts runs that ended reporting a second message, by
	// kind (proven, possible).
	Duplicates = "smsorch_duplicates_reported"
	// Failovers counts moves of an event to another provider, by from,
	// to and reason (not_executed: every attempt was answered "not
	// executed"; searched_none: a search past the window found no
	// message; decided: a person's resend named the provider).
	Failovers = "smsorch_failovers"
	// Settled counts runs that ended, by provider and state.
	Settled = "smsorch_runs_settled"
	// Awaiting is the number of runs awaiting a decision, fleet-wide,
	// from Temporal's visibility at scrape time.
	Awaiting = "smsorch_runs_awaiting_decision"
	// AcceptLatency is the time from an event's start (its run's) to
	// the provider's acceptance of its first message, by provider: a
	// histogram in seconds (smsorch_event_accept_latency_seconds).
	AcceptLatency = "smsorch_event_accept_latency"
	// RequestLimit is the fleet's request limit at each provider, in
	// requests a minute, as this worker is configured (a gauge; absent
	// for a provider without a limit).
	RequestLimit = "smsorch_provider_request_limit_per_minute"
	// IntakeRefused counts the HTTP intake's error answers by code
	// (unauthorized, stale, rate_limited, invalid, …).
	IntakeRefused = "smsorch_intake_refused"
)
