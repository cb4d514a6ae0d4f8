package wire

import (
	"context"
	"errors"
	"io"
	"net/http"
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

func TestJoinURLEscapesSegments(t *testing.T) {
	t.Parallel()
	require.Equal(t, "https://x/workspaces/a%2Fb/messages", JoinURL("https://x/", "workspaces", "a/b", "messages"))
}
