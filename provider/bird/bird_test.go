package bird

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/provider"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

const msg = `{"id":"m-1","status":"accepted","reference":"order-1-shipped","createdAt":"2026-11-29T12:00:00Z"}`

func TestClassifyEveryRowOfBirdsTable(t *testing.T) {
	t.Parallel()
	replay := http.Header{ReplayHeader: {"true"}}
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
		{"replay", 202, replay, msg, provider.Replayed, false, 0},
		{"extra fields tolerated", 202, nil, `{"id":"m-1","status":"accepted","x":{"y":1}}`, provider.Accepted, false, 0},
		{"key reuse", 409, nil, `{"code":"E01005","name":"IdempotencyKeyReuse","message":"…"}`, provider.Rejected, true, 0},
		{"in progress", 409, nil, `{"code":"E01004","name":"RequestInProgress","message":"…","traceId":"t"}`, provider.InProgress, false, 0},
		{"idempotency unavailable", 503, nil, `{"code":"E01033","name":"IdempotencyUnavailable"}`, provider.NotExecuted, false, 0},
		{"other 503", 503, nil, `upstream down`, provider.Unknown, false, 0},
		{"500", 500, nil, `{"code":"E00500"}`, provider.Unknown, false, 0},
		{"502 html", 502, nil, `<html>bad gateway</html>`, provider.Unknown, false, 0},
		// Retry-After is honoured on 503 and other 5xx, as on 429.
		{"E01033 with Retry-After", 503, http.Header{"Retry-After": {"4"}}, `{"code":"E01033"}`, provider.NotExecuted, false, 4 * time.Second},
		{"500 with Retry-After", 500, http.Header{"Retry-After": {"9"}}, ``, provider.Unknown, false, 9 * time.Second},
		// 408 and 425: the request was not processed; retried.
		{"408", 408, nil, ``, provider.NotExecuted, false, 0},
		{"425 with Retry-After", 425, http.Header{"Retry-After": {"2"}}, ``, provider.NotExecuted, false, 2 * time.Second},
		{"429 seconds", 429, http.Header{"Retry-After": {"12"}}, ``, provider.RateLimited, false, 12 * time.Second},
		{"429 date", 429, http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, ``, provider.RateLimited, false, 90 * time.Second},
		{"429 without header", 429, nil, ``, provider.RateLimited, false, 0},
		{"400", 400, nil, `{"code":"E00400","message":"bad number"}`, provider.Rejected, false, 0},
		{"401", 401, nil, ``, provider.Rejected, false, 0},
		{"403", 403, nil, ``, provider.Rejected, false, 0},
		{"404", 404, nil, ``, provider.Rejected, false, 0},
		{"422", 422, nil, `{}`, provider.Rejected, false, 0},
		// Answers we cannot read are never taken as accepted.
		{"2xx without id", 202, nil, `{"status":"accepted"}`, provider.Unknown, false, 0},
		{"2xx not JSON", 200, nil, `OK`, provider.Unknown, false, 0},
		{"2xx empty", 202, replay, ``, provider.Unknown, false, 0},
		{"409 without code", 409, nil, `conflict`, provider.Unknown, false, 0},
		{"redirect", 307, nil, ``, provider.Unknown, false, 0},
		{"informational", 102, nil, ``, provider.Unknown, false, 0},
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
			require.Equal(t, tc.status, r.HTTPStatus)
			require.NotEmpty(t, r.Reason)
			if r.Outcome.Sent() {
				require.Equal(t, "m-1", r.MessageID)
			}
		})
	}
}

func TestPlanIsByteStableAndCarriesTheKey(t *testing.T) {
	t.Parallel()
	c, err := New(Config{BaseURL: "http://127.0.0.1:1", AccessKey: "k", WorkspaceID: "w", ChannelID: "c"})
	require.NoError(t, err)
	a, err := c.Plan("order-1-shipped", "+31612345678", "", "Tom & Jerry <3")
	require.NoError(t, err)
	b, err := c.Plan("order-1-shipped", "+31612345678", "", "Tom & Jerry <3")
	require.NoError(t, err)
	require.Equal(t, a.Body, b.Body)
	require.Equal(t, `{"receiver":{"contacts":[{"identifierKey":"phonenumber","identifierValue":"+31612345678"}]},"body":{"type":"text","text":{"text":"Tom & Jerry <3"}},"reference":"order-1-shipped"}`, string(a.Body))
	_, err = c.Plan("order-1-shipped", "+31612345678", "MyShop", "hi")
	require.ErrorContains(t, err, "leave the sender empty")
}

func TestNewRefusesBrokenConfigWithoutLeakingTheKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{BaseURL: "api.bird.com", AccessKey: "secret-key", WorkspaceID: "w", ChannelID: "c"}, "not an http(s) URL"},
		{Config{BaseURL: "https://api.bird.com", WorkspaceID: "w", ChannelID: "c"}, "access key is empty"},
		{Config{BaseURL: "https://api.bird.com", AccessKey: "secret-key", ChannelID: "c"}, "workspace id and the channel id"},
		{Config{BaseURL: "https://api.bird.com", AccessKey: "secret-key", WorkspaceID: "w", ChannelID: "c", Timeout: -time.Second}, "negative"},
	} {
		_, err := New(tc.cfg)
		require.ErrorContains(t, err, tc.want)
		require.False(t, strings.Contains(err.Error(), "secret-key"))
	}
}

// FuzzClassify: no answer makes Classify panic, and only a 2xx with a
// message id is ever taken as sent.
// Run the fuzzer with: go test ./provider/bird -run '^$' -fuzz FuzzClassify
func FuzzClassify(f *testing.F) {
	f.Add(202, false, msg, "")
	f.Add(202, true, msg, "")
	f.Add(409, false, `{"code":"E01005"}`, "")
	f.Add(409, false, `{"code":"E01004"}`, "")
	f.Add(503, false, `{"code":"E01033"}`, "")
	f.Add(429, false, ``, "5")
	f.Add(200, false, `{"id":""}`, "")
	f.Add(500, true, `{"id":"m-1"}`, "-3")
	f.Fuzz(func(t *testing.T, status int, replay bool, body, retryAfter string) {
		h := http.Header{}
		if replay {
			h.Set(ReplayHeader, "true")
		}
		h.Set("Retry-After", retryAfter)
		r := Classify(status, h, []byte(body), now)
		if r.Reason == "" {
			t.Fatalf("no reason for %d %q", status, body)
		}
		if r.Outcome.Sent() && (status < 200 || status >= 300 || r.MessageID == "") {
			t.Fatalf("%d %q classified as %s with id %q", status, body, r.Outcome, r.MessageID)
		}
		if r.Outcome == provider.Replayed && !replay {
			t.Fatalf("a replay without the Idempotency-Replay header")
		}
		if r.RetryAfter < 0 {
			t.Fatalf("negative Retry-After %s", r.RetryAfter)
		}
	})
}
