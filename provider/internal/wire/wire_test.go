package wire

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/provider"
)

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":     0,
		"3":    3 * time.Second,
		"-1":   0,
		"soon": 0,
		now.Add(time.Minute).Format(http.TimeFormat):  time.Minute,
		now.Add(-time.Minute).Format(http.TimeFormat): 0,
	} {
		require.Equal(t, want, RetryAfter(http.Header{"Retry-After": {v}}, now), v)
	}
}

func TestTransportFailureIsUnknown(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]string{
		context.DeadlineExceeded:   "timed out",
		io.ErrUnexpectedEOF:        "connection closed before the answer",
		errors.New("dial refused"): "dial refused",
	} {
		r := TransportFailure(provider.Bird, err)
		require.Equal(t, provider.Unknown, r.Outcome)
		require.Contains(t, r.Reason, want)
		require.Contains(t, r.Reason, "may have taken effect")
	}
}

// A refused connection sent no request: certainly not executed.
func TestRefusedConnectionIsNotExecuted(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	_, err = NewHTTPClient(provider.Bird, time.Second).Get("http://" + addr + "/")
	require.Error(t, err)
	r := TransportFailure(provider.Sendy, err)
	require.Equal(t, provider.NotExecuted, r.Outcome, err.Error())
	require.Contains(t, r.Reason, "refused")
}

func TestJoinURLEscapesSegments(t *testing.T) {
	t.Parallel()
	require.Equal(t, "https://x/workspaces/a%2Fb/messages", JoinURL("https://x/", "workspaces", "a/b", "messages"))
}

// A connection that drops after the provider acted must surface as one
// failed attempt, not be re-sent behind our back by net/http.
func TestDoNeverResendsQuietly(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 2 { // the second request arrives on the kept-alive connection
			conn, _, _ := w.(http.Hijacker).Hijack()
			_ = conn.Close()
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	hc := NewHTTPClient(provider.Bird, time.Second)
	h := http.Header{"Idempotency-Key": {"k"}}
	_, err := Do(context.Background(), hc, nil, http.MethodPost, srv.URL, h, []byte("{}"))
	require.NoError(t, err)
	_, err = Do(context.Background(), hc, nil, http.MethodPost, srv.URL, h, []byte("{}"))
	require.Error(t, err, "the drop is reported")
	require.EqualValues(t, 2, hits.Load(), "and not retried by the transport")
}
