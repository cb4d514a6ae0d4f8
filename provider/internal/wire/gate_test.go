package wire

// The gate (httptrace GotConn + Slot.Use): a request the gate holds
// back reaches the server with no byte, on a new or a reused
// connection, in clear or over TLS, and the send is NotExecuted.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/internal/tracing"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/provider/pace/pacetest"
)

// countingListener counts the bytes the server reads from each
// connection it accepts (after TLS, when it wraps a TLS listener).
type countingListener struct {
	net.Listener
	read  atomic.Int64
	conns atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.conns.Add(1)
	return &countingConn{Conn: c, l: l}, nil
}

type countingConn struct {
	net.Conn
	l *countingListener
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.l.read.Add(int64(n))
	return n, err
}

// gateServer is a Sendy-like endpoint that answers 202, with the bytes
// it read counted; tlsOn puts TLS under the count (bytes are decrypted
// application bytes). It returns the URL and a client built like
// NewHTTPClient (HTTP/1.1 only) that trusts it.
func gateServer(t *testing.T, tlsOn bool) (string, *countingListener, *http.Client, *atomic.Int64) {
	t.Helper()
	var handled atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handled.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"id":"msg-1","status":"queued","credits_charged":1}`))
	})
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hc := NewHTTPClient(provider.Sendy, 5*time.Second)
	var ln *countingListener
	scheme := "http"
	if tlsOn {
		ts := httptest.NewUnstartedServer(nil) // only for its certificate
		ts.StartTLS()
		cert := ts.TLS.Certificates[0]
		leaf, err := x509.ParseCertificate(cert.Certificate[0])
		require.NoError(t, err)
		ts.Close()
		ln = &countingListener{Listener: tls.NewListener(inner, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}})}
		pool := x509.NewCertPool()
		pool.AddCert(leaf)
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.ForceAttemptHTTP2 = false
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
		hc = &http.Client{Timeout: 5 * time.Second, Transport: tracing.Transport(tr, "sendy"),
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		scheme = "https"
	} else {
		ln = &countingListener{Listener: inner}
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return scheme + "://" + inner.Addr().String(), ln, hc, &handled
}

func send(ctx context.Context, hc *http.Client, pace provider.Pacer, u string) provider.Result {
	req := provider.Request{Provider: provider.Sendy, Key: "order-1", Body: []byte(`{"to":"+31612345678","from":"ACME","body":"hi"}`)}
	return Send(ctx, hc, pace, provider.Sendy, u, http.Header{}, req, func(status int, h http.Header, body []byte, now time.Time) provider.Result {
		if status == http.StatusAccepted {
			return provider.Result{Outcome: provider.Accepted, HTTPStatus: status}
		}
		return provider.Result{Outcome: provider.Unknown, HTTPStatus: status}
	})
}

// (a) A send held back at its connection: nothing of it reaches the
// server, on a new connection or on a reused idle one, and the outcome
// is NotExecuted.
func TestGateHeldSendSendsNoByte(t *testing.T) {
	t.Parallel()
	for _, tlsOn := range []bool{false, true} {
		name := "plain"
		if tlsOn {
			name = "tls"
		}
		t.Run(name+"/new connection", func(t *testing.T) {
			u, ln, hc, handled := gateServer(t, tlsOn)
			for i := range 20 {
				res := send(context.Background(), hc, &pacetest.Script{Uses: []bool{false}}, u)
				require.Equal(t, provider.NotExecuted, res.Outcome, "try %d: %s", i, res.Reason)
			}
			time.Sleep(50 * time.Millisecond)
			require.Zero(t, ln.read.Load(), "bytes of held requests read by the server")
			require.Zero(t, handled.Load())
		})
		t.Run(name+"/reused connection", func(t *testing.T) {
			u, ln, hc, handled := gateServer(t, tlsOn)
			for i := range 20 {
				res := send(context.Background(), hc, &pacetest.Script{Uses: []bool{true}}, u)
				require.Equal(t, provider.Accepted, res.Outcome, res.Reason)
				time.Sleep(10 * time.Millisecond) // back in the idle pool
				before := ln.read.Load()
				var reused atomic.Bool
				ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused.Store(i.Reused) }})
				res = send(ctx, hc, &pacetest.Script{Uses: []bool{false}}, u)
				require.True(t, reused.Load(), "try %d: the held send had a reused connection", i)
				require.Equal(t, provider.NotExecuted, res.Outcome, "try %d: %s", i, res.Reason)
				time.Sleep(20 * time.Millisecond)
				require.Equal(t, before, ln.read.Load(), "try %d: bytes of the held request read by the server", i)
			}
			require.EqualValues(t, 20, handled.Load())
		})
	}
}

// (a) A held lookup (GET) on a reused connection: no byte, NotSent.
func TestGateHeldLookupOnReusedConnection(t *testing.T) {
	t.Parallel()
	u, ln, hc, handled := gateServer(t, false)
	_, err := Do(context.Background(), hc, &pacetest.Script{Uses: []bool{true}}, http.MethodGet, u, nil, nil)
	require.NoError(t, err)
	time.Sleep(10 * time.Millisecond)
	before := ln.read.Load()
	_, err = Do(context.Background(), hc, &pacetest.Script{Uses: []bool{false}}, http.MethodGet, u, nil, nil)
	require.ErrorIs(t, err, provider.ErrNotSent)
	time.Sleep(20 * time.Millisecond)
	require.Equal(t, before, ln.read.Load())
	require.EqualValues(t, 1, handled.Load())
	require.EqualValues(t, 1, ln.conns.Load(), "no dial loop after the held request")
}

// (d) Many requests at once, some held: run with -race. Every held one
// is NotExecuted, every other Accepted, and the server handled exactly
// the ones let through.
func TestGateConcurrentHeldAndPassed(t *testing.T) {
	t.Parallel()
	u, _, hc, handled := gateServer(t, false)
	var wg sync.WaitGroup
	var passed atomic.Int64
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok := i%3 != 0
			res := send(context.Background(), hc, &pacetest.Script{Uses: []bool{ok}}, u)
			if ok {
				require.Equal(t, provider.Accepted, res.Outcome, res.Reason)
				passed.Add(1)
			} else {
				require.Equal(t, provider.NotExecuted, res.Outcome, res.Reason)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, passed.Load(), handled.Load())
}
