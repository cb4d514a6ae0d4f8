package sendy

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/provider"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

const msg = `{"id":"msg_1","status":"queued","to":"+972501234567","from":"MyShop","credits_charged":1,"credits_refunded":0,"refunded":false,"created_at":"2026-11-29T12:00:00Z"}`

func errBody(code string) string { return `{"error":{"code":"` + code + `","message":"…"}}` }

func TestClassifyEveryRowOfSendysTable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		status      int
		header      http.Header
		body        string
		want        provider.Outcome
		keyConflict bool
		retryAfter  time.Duration
	}{
		{"new send", 202, nil, msg, provider.Accepted, false, 0},
		{"replay", 200, nil, msg, provider.Replayed, false, 0},
		{"replay with current status", 200, nil, strings.Replace(msg, "queued", "delivered", 1), provider.Replayed, false, 0},
		{"key conflict", 409, nil, errBody("IDEMPOTENCY_CONFLICT"), provider.Rejected, true, 0},
		{"429", 429, http.Header{"Retry-After": {"30"}}, errBody("RATE_LIMITED"), provider.RateLimited, false, 30 * time.Second},
		{"500", 500, nil, errBody("INTERNAL"), provider.Unknown, false, 0},
		{"503", 503, nil, ``, provider.Unknown, false, 0},
		{"503 with Retry-After", 503, http.Header{"Retry-After": {"20"}}, ``, provider.Unknown, false, 20 * time.Second},
		// Without Retry-After a 429 waits at least Sendy's pace (60 a minute).
		{"429 without Retry-After", 429, nil, errBody("RATE_LIMITED"), provider.RateLimited, false, time.Second},
		{"429 with Retry-After 0", 429, http.Header{"Retry-After": {"0"}}, errBody("RATE_LIMITED"), provider.RateLimited, false, time.Second},
		{"408", 408, nil, ``, provider.NotExecuted, false, 0},
		{"425", 425, nil, ``, provider.NotExecuted, false, 0},
		{"400", 400, nil, errBody("INVALID_RECIPIENT"), provider.Rejected, false, 0},
		{"402", 402, nil, errBody("INSUFFICIENT_CREDIT"), provider.Rejected, false, 0},
		{"403 opted out", 403, nil, errBody("RECIPIENT_OPTED_OUT"), provider.Rejected, false, 0},
		{"401", 401, nil, errBody("UNAUTHORIZED"), provider.Rejected, false, 0},
		{"404", 404, nil, ``, provider.Rejected, false, 0},
		// Answers we cannot read are never taken as accepted.
		{"201 is not Sendy's", 201, nil, msg, provider.Unknown, false, 0},
		{"202 without id", 202, nil, `{"status":"queued"}`, provider.Unknown, false, 0},
		{"200 not JSON", 200, nil, `OK`, provider.Unknown, false, 0},
		{"409 other code", 409, nil, errBody("SOMETHING"), provider.Unknown, false, 0},
		{"409 unreadable", 409, nil, `conflict`, provider.Unknown, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := tc.header
			if h == nil {
				h = http.Header{}
			}
			r := Classify(tc.status, h, []byte(tc.body), now)
			require.Equal(t, tc.want, r.Outcome, r.Reason)
			require.Equal(t, tc.keyConflict, r.KeyConflict)
			require.Equal(t, tc.retryAfter, r.RetryAfter)
			require.NotEmpty(t, r.Reason)
			if r.Outcome.Sent() {
				require.Equal(t, "msg_1", r.MessageID)
				require.Equal(t, 1, r.Credits)
			}
		})
	}
}

func TestPlan(t *testing.T) {
	t.Parallel()
	c, err := New(Config{BaseURL: "http://127.0.0.1:1", Token: "t", Sender: "MyShop"})
	require.NoError(t, err)
	r, err := c.Plan("order-1-shipped", "+972501234567", "", "Order 1 <shipped>")
	require.NoError(t, err)
	require.Equal(t, `{"to":"+972501234567","from":"MyShop","body":"Order 1 <shipped>","mode":"transactional"}`, string(r.Body))
	r, err = c.Plan("order-1-shipped", "+972501234567", "Other", "hi")
	require.NoError(t, err)
	require.Equal(t, "Other", r.From)

	noSender, err := New(Config{BaseURL: "http://127.0.0.1:1", Token: "t"})
	require.NoError(t, err)
	_, err = noSender.Plan("order-1-shipped", "+972501234567", "", "hi")
	require.ErrorContains(t, err, "no sender")
}

func TestNewRefusesBrokenConfig(t *testing.T) {
	t.Parallel()
	_, err := New(Config{BaseURL: "ftp://x", Token: "t"})
	require.ErrorContains(t, err, "not an http(s) URL")
	_, err = New(Config{BaseURL: "https://api.sendy.example"})
	require.ErrorContains(t, err, "token is empty")
}

// FuzzClassify: no answer makes Classify panic, and only a 200 or 202 with
// a message id is ever taken as sent; only a 200 is a replay.
// Run the fuzzer with: go test ./provider/sendy -run '^$' -fuzz FuzzClassify
func FuzzClassify(f *testing.F) {
	f.Add(202, msg, "")
	f.Add(200, msg, "")
	f.Add(409, errBody("IDEMPOTENCY_CONFLICT"), "")
	f.Add(429, ``, "7")
	f.Add(202, `{"id":5}`, "")
	f.Add(200, `{"error":{"code":"X"}}`, "x")
	f.Fuzz(func(t *testing.T, status int, body, retryAfter string) {
		r := Classify(status, http.Header{"Retry-After": {retryAfter}}, []byte(body), now)
		if r.Reason == "" {
			t.Fatalf("no reason for %d %q", status, body)
		}
		if r.Outcome.Sent() && ((status != 200 && status != 202) || r.MessageID == "") {
			t.Fatalf("%d %q classified as %s with id %q", status, body, r.Outcome, r.MessageID)
		}
		if r.Outcome == provider.Replayed && status != 200 {
			t.Fatalf("%d classified as a replay", status)
		}
		if r.RetryAfter < 0 {
			t.Fatalf("negative Retry-After %s", r.RetryAfter)
		}
	})
}
