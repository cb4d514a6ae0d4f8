//go:build !race

package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/acme/smsorch/internal/stackspec"
)

// uiFront is the web UI's listener: it answers only for the hosts the UI
// serves, and passes the rest to the UI server on a loopback port of its
// own. A page of another site whose name an attacker points at this
// address (DNS rebinding) names its own host, and gets 421.
type uiFront struct {
	srv   *http.Server
	done  chan error
	hosts []string
	// login: the UI logs people in, and the routes that reach Temporal
	// without the person's token are refused.
	login bool
}

// uiHosts are the Host values the UI at addr answers for: addr itself,
// its loopback names when it listens on loopback or every interface,
// and extra (host:port, from the origins people open it at).
func uiHosts(addr string, extra []string) []string {
	host, port, _ := net.SplitHostPort(addr)
	hosts := []string{addr}
	ip := net.ParseIP(host)
	if ip != nil && (ip.IsLoopback() || ip.IsUnspecified()) {
		for _, h := range []string{"127.0.0.1", "localhost", "[::1]"} {
			hosts = append(hosts, h+":"+port)
		}
	}
	for _, h := range extra {
		if h = strings.ToLower(strings.TrimSpace(h)); h != "" && !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// hostsOfURLs are the host:port of each URL (the scheme's port when it
// gives none).
func hostsOfURLs(urls ...string) []string {
	var out []string
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			continue
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
		}
		out = append(out, net.JoinHostPort(u.Hostname(), port))
	}
	return out
}

// guard refuses a request for a host the UI does not serve.
func (f *uiFront) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := strings.ToLower(r.Host)
		ok := slices.Contains(f.hosts, host)
		if _, _, err := net.SplitHostPort(host); err != nil {
			// No port: the scheme's, HTTP's or (behind a TLS proxy) HTTPS's.
			ok = slices.Contains(f.hosts, net.JoinHostPort(host, "80")) || slices.Contains(f.hosts, net.JoinHostPort(host, "443"))
		}
		if !ok {
			http.Error(w, fmt.Sprintf("this web UI answers for %s, not %q: open it by one of those (--codec-ui-origin adds one)", strings.Join(f.hosts, ", "), r.Host), http.StatusMisdirectedRequest)
			return
		}
		// The UI server's raw history download calls Temporal without the
		// person's token, so as the UI's own certificate, and without the
		// login's check: behind the login it is off.
		if f.login && (strings.Contains(strings.ToLower(r.URL.Path), "history.json") || strings.Contains(strings.ToLower(r.URL.RawPath), "history.json")) {
			http.Error(w, "the raw history download is off behind the login (it would reach Temporal without your token): read the history in the UI, or with the temporal CLI", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// startUIFront listens on addr and passes what it takes to the UI
// server at inner.
func startUIFront(addr, inner string, hosts []string, login bool) (*uiFront, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("the web UI cannot listen on %s: %w (stop what uses it or choose another UI address)", addr, err)
	}
	target := &url.URL{Scheme: "http", Host: inner}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1 // streamed answers go out as they come
	f := &uiFront{done: make(chan error, 1), hosts: hosts, login: login}
	f.srv = &http.Server{Handler: f.guard(proxy), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() { f.done <- f.srv.Serve(l) }()
	return f, nil
}

func (f *uiFront) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := f.srv.Shutdown(ctx)
	if serveErr := <-f.done; err == nil && !errors.Is(serveErr, http.ErrServerClosed) {
		err = serveErr
	}
	return err
}

// checkProvider reads the login's provider's discovery document before
// the UI server does (which would end the process on a provider it
// cannot reach, saying little): within 10 s, for the issuer given, and,
// where this process's server takes API keys, with the key set the
// server checks tokens against.
func checkProvider(ctx context.Context, login *stackspec.UILogin, serverJWKS string) error {
	if login == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	doc := strings.TrimSuffix(login.Issuer, "/") + "/.well-known/openid-configuration"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, doc, nil)
	if err != nil {
		return fmt.Errorf("the web UI's login provider %s: %w", login.Issuer, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("the web UI's login provider does not answer at %s (%w): check --ui-oidc-issuer and that this host reaches it", doc, err)
	}
	defer func() { _ = resp.Body.Close() }()
	var d struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the web UI's login provider answers %s at %s: check --ui-oidc-issuer (the issuer URL, without /.well-known/…)", resp.Status, doc)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&d); err != nil {
		return fmt.Errorf("the web UI's login provider's %s is not a discovery document: %w", doc, err)
	}
	if strings.TrimSuffix(d.Issuer, "/") != strings.TrimSuffix(login.Issuer, "/") {
		return fmt.Errorf("the web UI's login provider at %s calls itself %q: give that as --ui-oidc-issuer (and --temporal-api-keys-issuer)", login.Issuer, d.Issuer)
	}
	if serverJWKS != "" && d.JWKSURI != serverJWKS {
		return fmt.Errorf("the login provider signs people's tokens with the keys at %s, but this Temporal checks tokens against %s: set --temporal-api-keys-jwks %s", d.JWKSURI, serverJWKS, d.JWKSURI)
	}
	return nil
}
