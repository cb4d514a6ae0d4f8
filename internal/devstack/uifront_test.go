//go:build !race

package devstack

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/internal/freeport"
	"github.com/acme/smsorch/internal/stackspec"
)

// The web UI answers only for the hosts it serves: a page whose name an
// attacker pointed at the UI's address (DNS rebinding) names its own
// host and gets 421, before the UI server sees the request.
func TestTheWebUIAnswersOnlyForTheHostsItServes(t *testing.T) {
	inner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "the UI, for "+r.Host)
	}))
	t.Cleanup(inner.Close)
	port, err := freeport.Low("127.0.0.1")
	require.NoError(t, err)
	addr := "127.0.0.1:" + itoa(port)
	front, err := startUIFront(addr, strings.TrimPrefix(inner.URL, "http://"), uiHosts(addr, hostsOfURLs("https://temporal.example.com", "http://ui.internal:8080")), true)
	require.NoError(t, err)
	t.Cleanup(func() { _ = front.stop() })

	get := func(host string) (int, string) { return getPath(t, addr, host, "/api/v1/settings") }
	for _, path := range []string{"/api/v1/namespaces/default/workflows/order-7-shipped/run//history.json", "/api/v1/namespaces/default/workflows/x/run/y/history%2Ejson", "/api/v1/namespaces/default/workflows/x/run/y/HISTORY.JSON"} {
		code, body := getPath(t, addr, addr, path)
		require.Equal(t, http.StatusForbidden, code, "%s behind the login: %s", path, body)
		require.Contains(t, body, "the raw history download is off behind the login")
	}
	for _, host := range []string{addr, "localhost:" + itoa(port), "temporal.example.com:443", "ui.internal:8080", "LOCALHOST:" + itoa(port), "temporal.example.com"} {
		code, body := get(host)
		require.Equal(t, http.StatusOK, code, "%s: %s", host, body)
		require.Equal(t, "the UI, for "+host, body, "the UI server sees the Host asked for")
	}
	for _, host := range []string{"evil.example:" + itoa(port), "evil.example", "127.0.0.1:1", "ui.internal"} {
		code, body := get(host)
		require.Equal(t, http.StatusMisdirectedRequest, code, host)
		require.Contains(t, body, "this web UI answers for "+addr)
		require.NotContains(t, body, "the UI, for")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func getPath(t *testing.T, addr, host, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	require.NoError(t, err)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The login's provider is read before the UI server reads it, with what
// to fix when it is not the one configured.
func TestTheLoginsProviderIsCheckedBeforeTheUIStarts(t *testing.T) {
	var issuer string
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/openid-configuration" {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, `{"issuer":"`+issuer+`","jwks_uri":"`+issuer+`/keys"}`)
	}))
	t.Cleanup(idp.Close)
	issuer = idp.URL
	login := &stackspec.UILogin{Issuer: idp.URL + "/"}
	require.NoError(t, checkProvider(t.Context(), login, idp.URL+"/keys"))
	require.NoError(t, checkProvider(t.Context(), login, ""), "a UI-only process checks no key set")
	require.ErrorContains(t, checkProvider(t.Context(), login, "https://elsewhere/keys"), "but this Temporal checks tokens against https://elsewhere/keys: set --temporal-api-keys-jwks "+idp.URL+"/keys")
	issuer = "https://idp.example"
	require.ErrorContains(t, checkProvider(t.Context(), login, ""), `calls itself "https://idp.example": give that as --ui-oidc-issuer`)
	require.ErrorContains(t, checkProvider(t.Context(), &stackspec.UILogin{Issuer: idp.URL + "/realms/x"}, ""), "answers 404 Not Found")
	require.ErrorContains(t, checkProvider(t.Context(), &stackspec.UILogin{Issuer: "http://127.0.0.1:1"}, ""), "does not answer at http://127.0.0.1:1/.well-known/openid-configuration")
	require.NoError(t, checkProvider(t.Context(), nil, ""), "no login, nothing to read")
}
