//go:build !race

package devstack

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/acme/smsorch/internal/freeport"
	"github.com/acme/smsorch/internal/stackspec"
	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
	"go.uber.org/zap"
)

func (s *Stack) waitUI(ctx context.Context) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case err := <-s.uiDone:
			s.uiDone <- err // Stop reads it again
			return fmt.Errorf("the web UI on %s stopped at start: %w", s.uiAddr, err)
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.UIURL()+"/", nil)
		if resp, err := hc.Do(req); err == nil {
			_ = resp.Body.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the web UI on %s does not answer: %w", s.uiAddr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// buildUI makes the Temporal web UI of the stack, pointed at its
// frontend and the codec endpoint, on the UI address.
func (s *Stack) buildUI() error {
	uiHost, uiPort, err := freeport.Resolve(s.cfg.UIAddress)
	if err != nil {
		return fmt.Errorf("UI address %s: %w", s.cfg.UIAddress, err)
	}
	s.uiAddr = net.JoinHostPort(uiHost, strconv.Itoa(uiPort))
	// The UI server listens on loopback behind the front, which checks
	// the Host of each request (uifront.go).
	innerPort, err := freeport.Low("127.0.0.1")
	if err != nil {
		return fmt.Errorf("a loopback port for the web UI behind its front: %w", err)
	}
	s.uiInner = net.JoinHostPort("127.0.0.1", strconv.Itoa(innerPort))
	s.ui = uiserver.NewServer(uiserveroptions.WithConfigProvider(&uiconfig.Config{
		Host:                "127.0.0.1",
		Port:                innerPort,
		TemporalGRPCAddress: s.frontendAddr,
		EnableUI:            true,
		DefaultNamespace:    s.cfg.Namespace,
		CORS:                uiconfig.CORS{CookieInsecure: true},
		HideLogs:            true,
		DisableNewsFetch:    true, // the machines this runs on may have no internet
		Codec:               uiconfig.Codec{Endpoint: s.cfg.CodecEndpoint},
		TLS:                 s.uiTLS(),
		Auth:                uiAuth(s.cfg.UILogin),
	}))
	return nil
}

// uiAuth is the UI's login: none, or the OpenID Connect provider's,
// straight to it (no page of the UI's own first), the person's ID token
// as the bearer towards Temporal.
func uiAuth(l *stackspec.UILogin) uiconfig.Auth {
	if l == nil {
		return uiconfig.Auth{}
	}
	return uiconfig.Auth{Enabled: true, RedirectToProvider: true, Providers: []uiconfig.AuthProvider{{
		Label: "sso", Type: "oidc", ProviderURL: l.Issuer, IssuerUrl: l.Issuer,
		ClientID: l.ClientID, ClientSecret: l.ClientSecret, CallbackURL: l.CallbackURL,
		Scopes: []string{"openid", "profile", "email"}, UseIDTokenAsBearer: true,
	}}}
}

// uiTLS is how the UI's server reaches the frontend: with the server's
// own certificate in its process, with the one UIConfig names beside a
// Temporal that runs elsewhere.
func (s *Stack) uiTLS() uiconfig.TLS {
	t := s.cfg.TLS
	if t == nil {
		return uiconfig.TLS{}
	}
	name := t.ServerName
	if !s.uiOnly {
		name = s.tlsName
	}
	return uiTLS(t.CertFile, t.KeyFile, t.CAFile, name)
}

// UIConfig configures StartUI: the web UI alone, for a Temporal that
// runs elsewhere.
type UIConfig struct {
	// Address is the UI's host:port (port 0 picks a free port).
	Address string
	// Frontend is the Temporal frontend the UI's server talks to.
	Frontend string
	// Namespace is the one the UI opens; default "default".
	Namespace string
	// CodecEndpoint is the codec server as the person's browser reaches it.
	CodecEndpoint string
	// TLS, when set, is the UI's client certificate and key, and the CA
	// that signed the frontend's certificate (ServerName: the name to
	// check in it; default the frontend's host).
	TLS *TLS
	// Login, when set, puts the UI behind an OpenID Connect login.
	Login *stackspec.UILogin
	// Hosts are the host:port the UI answers for besides its own address
	// (and its loopback names): where people open it.
	Hosts  []string
	Logger *zap.Logger
}

// StartUI serves the same web UI as Start, pointed at a Temporal frontend
// that runs elsewhere (a cluster of --server-only processes), and returns
// once it answers. Stop stops it.
func StartUI(ctx context.Context, cfg UIConfig) (*Stack, error) {
	if cfg.Namespace == "" {
		cfg.Namespace = DefaultNamespace
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if _, _, err := net.SplitHostPort(cfg.Frontend); err != nil {
		return nil, fmt.Errorf("the web UI's Temporal frontend %q is not host:port: %w", cfg.Frontend, err)
	}
	if _, _, err := net.SplitHostPort(cfg.Address); err != nil {
		return nil, fmt.Errorf("UI address %q is not host:port (for example %s): %w", cfg.Address, DefaultUIAddress, err)
	}
	if cfg.TLS != nil {
		if err := cfg.TLS.LoadClient(); err != nil {
			return nil, err
		}
	}
	s := &Stack{cfg: Config{UIAddress: cfg.Address, Namespace: cfg.Namespace, CodecEndpoint: cfg.CodecEndpoint, Logger: cfg.Logger, TLS: cfg.TLS, UILogin: cfg.Login, UIHosts: cfg.Hosts}, frontendAddr: cfg.Frontend, uiOnly: true}
	if err := checkProvider(ctx, cfg.Login, ""); err != nil {
		return nil, err
	}
	if err := s.buildUI(); err != nil {
		return nil, err
	}
	// startUI listens on the UI's address, and says so when it cannot.
	if err := s.startUI(); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := s.waitUI(wctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// startUI starts the UI server and its front.
func (s *Stack) startUI() error {
	hosts := uiHosts(s.uiAddr, append(slices.Clone(s.cfg.UIHosts), hostsOfURLs(s.callbackURL())...))
	front, err := startUIFront(s.uiAddr, s.uiInner, hosts, s.cfg.UILogin != nil)
	if err != nil {
		return err
	}
	s.uiFront = front
	s.uiDone = make(chan error, 1)
	go func() { s.uiDone <- s.ui.Start() }()
	return nil
}

func (s *Stack) callbackURL() string {
	if s.cfg.UILogin == nil {
		return ""
	}
	return s.cfg.UILogin.CallbackURL
}
