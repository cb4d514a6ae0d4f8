// Package defaults holds the embedded Temporal stack's default addresses
// and names. It imports nothing, so a program built without the embedded
// server (the production worker, built with -tags nodevstack) can still
// name them in its flags and messages.
package defaults

const (
	// FrontendAddress and UIAddress match the Temporal CLI's dev server,
	// so its habits and docs carry over.
	FrontendAddress = "127.0.0.1:7233"
	UIAddress       = "127.0.0.1:8233"
	// DataDir holds the dev stack's state, relative to the working directory.
	DataDir = ".smsorch"
	// VisibilitySuffix names the visibility database beside the
	// persistence database on PostgreSQL (temporal, temporal_visibility).
	VisibilitySuffix = "_visibility"
	// Off as a UI address starts no UI.
	Off = "off"
	// Namespace is the namespace the dev stack registers.
	Namespace = "default"
)

// Connections each of a server process's four services (frontend,
// history, matching, worker: each keeps its own pools) opens at most to
// the persistence database and to the visibility database. One process
// then holds at most 4 x (4 + 2) = 24; PostgreSQL accepts 100 by default,
// so a cluster of two servers leaves room for the workers' ledger pools
// and an operator's psql (docs/operations.md, "Connections", adds it up for more
// replicas).
const (
	PostgresServices           = 4
	PostgresMaxConns           = 4
	PostgresVisibilityMaxConns = 2
)

// PostgresMaxConnsPerServer is the most connections one server process
// opens.
const PostgresMaxConnsPerServer = PostgresServices * (PostgresMaxConns + PostgresVisibilityMaxConns)
