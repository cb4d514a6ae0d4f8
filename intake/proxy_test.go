package intake

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/starter"
)

// A signed POST cannot come from a browser's cross-site form, so its
// Content-Type proves nothing; refusing it would break every sender that
// followed the earlier README (`curl ... -d "$body"` sends
// application/x-www-form-urlencoded), and 415 is a final answer: the
// event would be dropped by a sender that does not retry 4xx.
func TestASignedPostIsNotRefusedForItsContentType(t *testing.T) {
	t.Parallel()
	now := time.Now()
	secret := logging.Secret("0123456789abcdef0123456789abcdef")
	h := New(starter.New(nil), Config{Secrets: []logging.Secret{secret}, Now: func() time.Time { return now }})
	bad := strings.Replace(event, "+31612345678", "0612345678", 1) // invalid: answered before Temporal
	for _, ct := range []string{"application/x-www-form-urlencoded", "text/plain"} {
		header := Sign(secret, now, []byte(bad))
		header["Content-Type"] = ct
		code, p := post(t, h, bad, header)
		require.Equal(t, http.StatusBadRequest, code, "Content-Type %q: a signed request goes on to the event's checks", ct)
		require.Equal(t, "to", p.Error.Field)
	}
}

// postFrom posts a body that is not an event (answered 400 once past
// the rate and the proxy checks) from remote, with X-Forwarded-For xff.
func postFrom(h http.Handler, remote, xff string) int {
	req := httptest.NewRequest(http.MethodPost, "/v1/events", strings.NewReader("{"))
	req.Header.Set("Content-Type", "application/json")
	req.RemoteAddr = remote
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// The common setup: nginx on the same host terminates TLS and forwards
// to 127.0.0.1:8080. Named (--intake-behind-proxy=127.0.0.1), its
// forwarded addresses key the clients; were loopback taken as the client,
// every sender would share one bucket and one busy sender would make
// every other one get 429.
func TestALoopbackProxyIsHonoured(t *testing.T) {
	t.Parallel()
	now := time.Now()
	_, lo, err := net.ParseCIDR("127.0.0.1/32")
	require.NoError(t, err)
	h := New(starter.New(nil), Config{RatePerMinute: 60, Proxies: []*net.IPNet{lo}, Now: func() time.Time { return now }})
	for i := 0; i < 6; i++ {
		require.Equal(t, http.StatusBadRequest, postFrom(h, "127.0.0.1:4000", "203.0.113.7"), "request %d of the burst", i)
	}
	require.Equal(t, http.StatusBadRequest, postFrom(h, "127.0.0.1:4001", "203.0.113.8"), "another client behind the local proxy has its own budget")
}

// Two named proxies in a row (a load balancer, then nginx): the last hop
// is the load balancer's own address, which would put all clients in its
// bucket. The rightmost address that is not a named proxy is the client.
func TestAChainOfNamedProxiesKeysTheClient(t *testing.T) {
	t.Parallel()
	now := time.Now()
	_, lan, err := net.ParseCIDR("10.1.0.0/16")
	require.NoError(t, err)
	h := New(starter.New(nil), Config{RatePerMinute: 60, Proxies: []*net.IPNet{lan}, Now: func() time.Time { return now }})
	for i := 0; i < 6; i++ {
		require.Equal(t, http.StatusBadRequest, postFrom(h, "10.1.0.5:4000", "203.0.113.7, 10.1.0.9"), "request %d", i)
	}
	require.Equal(t, http.StatusBadRequest, postFrom(h, "10.1.0.5:4000", "203.0.113.8, 10.1.0.9"), "another client")
}

// Behind a named proxy, each client is keyed by the address the proxy
// added to X-Forwarded-For (the rightmost that is not a proxy: those
// before it are the client's own word), and a request that comes around
// the proxy is refused; loopback (a health check) is always let in.
func TestBehindAProxyClientsAreKeyedByTheForwardedAddress(t *testing.T) {
	t.Parallel()
	now := time.Now()
	_, proxies, err := net.ParseCIDR("10.1.0.0/16")
	require.NoError(t, err)
	h := New(starter.New(nil), Config{RatePerMinute: 60, Proxies: []*net.IPNet{proxies}, Now: func() time.Time { return now }})
	from := func(remote, xff string) int { return postFrom(h, remote, xff) }
	for i := 0; i < 6; i++ {
		require.Equal(t, http.StatusBadRequest, from("10.1.0.5:4000", "203.0.113.7"), "request %d of the burst", i)
	}
	require.Equal(t, http.StatusTooManyRequests, from("10.1.0.5:4000", "203.0.113.7"), "the client's rate, not the proxy's")
	require.Equal(t, http.StatusTooManyRequests, from("10.1.0.6:4000", "198.51.100.1, 203.0.113.7"), "a forged first hop does not make another client")
	require.Equal(t, http.StatusBadRequest, from("10.1.0.5:4000", "203.0.113.8"), "another client behind the same proxy")
	require.Equal(t, http.StatusForbidden, from("192.0.2.10:4000", "203.0.113.9"), "around the proxy")
	require.Equal(t, http.StatusBadRequest, from("127.0.0.1:4000", ""), "loopback")
}
