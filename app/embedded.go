package app

import "crypto/tls"

// Embedded is the Temporal server and web UI a process runs itself: in
// dev and server-only modes both (package devstack), in ui-only mode the
// web UI alone. A worker built with -tags nodevstack has neither.
type Embedded interface {
	// FrontendAddress is the Temporal frontend (the one the UI talks to
	// in ui-only mode).
	FrontendAddress() string
	// ClientTLS is what a client in this process presents to the
	// embedded server, nil when it speaks plain gRPC.
	ClientTLS() *tls.Config
	// UIURL is the web UI's address, "" when it is off.
	UIURL() string
	Namespace() string
	// State says where Temporal keeps its state.
	State() string
	Stop() error
}
