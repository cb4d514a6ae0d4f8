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
)
