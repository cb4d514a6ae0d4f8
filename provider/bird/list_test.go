package bird

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// endless serves Bird's message list as if it never ended: every page
// holds one message and the token of the next, after delay.
func endless(t *testing.T, delay time.Duration) (*Client, *atomic.Int64) {
	t.Helper()
	var pages atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := pages.Add(1)
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"results":[{"id":"m-%d","status":"delivered","reference":"order-%d-shipped","createdAt":"2026-11-29T12:00:00Z"}],"nextPageToken":"p%d"}`, n, n, n)
	}))
	t.Cleanup(srv.Close)
	c, err := New(Config{BaseURL: srv.URL, AccessKey: "k", WorkspaceID: "w", ChannelID: "c"})
	require.NoError(t, err)
	return c, &pages
}

// A search of Bird's records that does not reach the last page is not an
// answer: reconciliation must take it as failed, never as "no message".
// List stops after maxPages pages and says so.
func TestListIsCutOffAfterMaxPages(t *testing.T) {
	t.Parallel()
	c, pages := endless(t, 0)
	from := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	got, err := c.List(context.Background(), from, from.Add(72*time.Hour))
	require.Nil(t, got, "no partial list")
	require.ErrorIs(t, err, ErrListCutOff)
	require.EqualValues(t, maxPages, pages.Load(), "no page past the cap is asked for")
	for _, says := range []string{"search cut off after 1000 pages (1000 messages)", "incomplete", "treat the search as failed"} {
		require.ErrorContains(t, err, says)
	}
}

// List stops at its context's deadline, between pages or during one,
// and says the search was cut off rather than passing on a bare timeout.
func TestListIsCutOffAtTheDeadline(t *testing.T) {
	t.Parallel()
	c, pages := endless(t, 20*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	got, err := c.List(ctx, start.Add(-72*time.Hour), start)
	require.Less(t, time.Since(start), 2*time.Second, "stopped near the deadline")
	require.Nil(t, got, "no partial list")
	require.ErrorIs(t, err, ErrListCutOff)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, pages.Load(), int64(maxPages))
	for _, says := range []string{"search cut off after", "deadline", "incomplete", "treat the search as failed"} {
		require.ErrorContains(t, err, says)
	}

	// A context already past its deadline asks for nothing.
	done, cancel2 := context.WithDeadline(context.Background(), start.Add(-time.Second))
	defer cancel2()
	before := pages.Load()
	_, err = c.List(done, start.Add(-time.Hour), start)
	require.ErrorIs(t, err, ErrListCutOff)
	require.True(t, errors.Is(err, context.DeadlineExceeded))
	require.Equal(t, before, pages.Load())

	// A cancelled search (a worker shutting down) is cut off too.
	cancelled, cancel3 := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel3)
	_, err = c.List(cancelled, start.Add(-time.Hour), start)
	require.ErrorIs(t, err, ErrListCutOff)
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorContains(t, err, "when its context was cancelled")
}
