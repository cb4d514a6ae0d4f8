package simulator

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// These tests speak raw HTTP, as the provider documents describe it, so
// they check the simulator without the project's own clients.

const (
	birdPath  = "/workspaces/ws-1/channels/ch-1/messages"
	sendyPath = "/api/v1/messages"
	birdBody  = `{"receiver":{"contacts":[{"identifierKey":"phonenumber","identifierValue":"+31612345678"}]},"body":{"type":"text","text":{"text":"Order 58213 has shipped."}},"reference":"order-58213-shipped"}`
	sendyBody = `{"to":"+972501234567","from":"MyShop","body":"Order 58213 has shipped.","mode":"transactional"}`
)

type bundle struct {
	sim *Server
	srv *httptest.Server
}

func setup(t *testing.T, mutate ...func(*Config)) bundle {
	t.Helper()
	cfg := Config{Seed: 7}
	for _, m := range mutate {
		m(&cfg)
	}
	sim, err := New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	return bundle{sim, srv}
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
	err    error
}

func (b bundle) do(method, path, key, body string, timeout time.Duration) answer {
	req, _ := http.NewRequest(method, b.srv.URL+path, strings.NewReader(body))
	if strings.HasPrefix(path, "/workspaces/") {
		req.Header.Set("Authorization", "AccessKey "+DefaultBirdAccessKey)
	} else {
		req.Header.Set("Authorization", "Bearer "+DefaultSendyToken)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	c := &http.Client{Timeout: timeout}
	resp, err := c.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return answer{status: resp.StatusCode, header: resp.Header, body: m}
}

func (b bundle) bird(key string) answer { return b.do("POST", birdPath, key, birdBody, 2*time.Second) }
func (b bundle) sendy(key string) answer {
	return b.do("POST", sendyPath, key, sendyBody, 2*time.Second)
}

func (b bundle) fault(t *testing.T, f Fault) {
	t.Helper()
	require.NoError(t, b.sim.AddFault(f))
}

func birdCode(a answer) string { s, _ := a.body["code"].(string); return s }
func sendyCode(a answer) string {
	e, _ := a.body["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func TestBirdContract(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.bird("k1")
	require.Equal(t, http.StatusAccepted, first.status)
	require.Equal(t, "accepted", first.body["status"])
	require.Equal(t, "order-58213-shipped", first.body["reference"])
	require.Empty(t, first.header.Get("Idempotency-Replay"))

	replay := b.bird("k1")
	require.Equal(t, http.StatusAccepted, replay.status)
	require.Equal(t, "true", replay.header.Get("Idempotency-Replay"))
	require.Equal(t, first.body["id"], replay.body["id"])

	spaced := b.do("POST", birdPath, "k1", strings.Replace(birdBody, `":`, `": `, 1), time.Second)
	require.Equal(t, http.StatusConflict, spaced.status)
	require.Equal(t, "E01005", birdCode(spaced))

	otherChannel := b.do("POST", "/workspaces/ws-1/channels/ch-2/messages", "k1", birdBody, time.Second)
	require.Equal(t, "E01005", birdCode(otherChannel), "the path is part of the request identity")

	otherWorkspace := b.do("POST", "/workspaces/ws-2/channels/ch-1/messages", "k1", birdBody, time.Second)
	require.Equal(t, http.StatusAccepted, otherWorkspace.status, "keys are scoped to the workspace")

	require.Equal(t, http.StatusAccepted, b.bird("").status)
	require.Equal(t, http.StatusAccepted, b.bird("").status, "without a key there is no protection")
	require.Len(t, b.sim.Messages(Filter{Provider: Bird}), 4)

	bad := b.do("POST", birdPath, "k2", `{"receiver":{"contacts":[]}}`, time.Second)
	require.Equal(t, http.StatusBadRequest, bad.status)
	badAgain := b.do("POST", birdPath, "k2", `{"receiver":{"contacts":[]}}`, time.Second)
	require.Equal(t, "true", badAgain.header.Get("Idempotency-Replay"), "completed 4xx answers are stored too")

	wrong := b.do("POST", birdPath, "k3", birdBody, time.Second)
	require.Equal(t, http.StatusAccepted, wrong.status)
	req, _ := http.NewRequest("POST", b.srv.URL+birdPath, strings.NewReader(birdBody))
	req.Header.Set("Authorization", "AccessKey nope")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

func TestSendyContract(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.OptOut = []string{"+972501234567"} })
	first := b.sendy("k1")
	require.Equal(t, http.StatusAccepted, first.status)
	require.Equal(t, "queued", first.body["status"])
	require.EqualValues(t, 1, first.body["credits_charged"])
	replay := b.sendy("k1")
	require.Equal(t, http.StatusOK, replay.status)
	require.Equal(t, first.body["id"], replay.body["id"])
	require.Equal(t, first.body["credits_charged"], replay.body["credits_charged"])

	conflict := b.do("POST", sendyPath, "k1", strings.Replace(sendyBody, "58213", "58214", 1), time.Second)
	require.Equal(t, http.StatusConflict, conflict.status)
	require.Equal(t, "IDEMPOTENCY_CONFLICT", sendyCode(conflict))

	require.Equal(t, http.StatusAccepted, b.sendy("").status)
	require.Equal(t, http.StatusAccepted, b.sendy("").status, "without a key every retry is a new message")
	require.Len(t, b.sim.Messages(Filter{Provider: Sendy}), 3)

	marketing := b.do("POST", sendyPath, "k2", strings.Replace(sendyBody, `,"mode":"transactional"`, "", 1), time.Second)
	require.Equal(t, http.StatusForbidden, marketing.status, "opt-outs apply to marketing messages")
	require.Equal(t, "RECIPIENT_OPTED_OUT", sendyCode(marketing))

	long := b.do("POST", sendyPath, "k3", strings.Replace(sendyBody, "Order 58213 has shipped.", strings.Repeat("x", 202), 1), time.Second)
	require.EqualValues(t, 2, long.body["credits_charged"], "one credit per started 201 characters")
}

func TestFaultDropAfterCommit(t *testing.T) {
	t.Parallel()
	for _, p := range []string{Bird, Sendy} {
		b := setup(t)
		b.fault(t, Fault{Kind: DropAfterCommit, Provider: p})
		send := b.bird
		if p == Sendy {
			send = b.sendy
		}
		dropped := send("k")
		require.Error(t, dropped.err, p)
		require.Len(t, b.sim.Messages(Filter{Provider: p}), 1, "%s: the send took effect", p)
		again := send("k")
		require.Contains(t, []int{http.StatusAccepted, http.StatusOK}, again.status)
		require.True(t, b.sim.Requests(Filter{Provider: p})[1].Replay, "%s: the stored answer is replayed", p)
		require.Len(t, b.sim.Messages(Filter{Provider: p}), 1)
		require.Equal(t, string(DropAfterCommit), b.sim.Requests(Filter{Provider: p})[0].Fault)
	}
}

func TestFaultUnstored(t *testing.T) {
	t.Parallel()
	for _, p := range []string{Bird, Sendy} {
		b := setup(t)
		b.fault(t, Fault{Kind: Unstored, Provider: p})
		send := b.bird
		if p == Sendy {
			send = b.sendy
		}
		require.Equal(t, http.StatusInternalServerError, send("k").status)
		require.Equal(t, http.StatusAccepted, send("k").status, "%s: nothing stored, so the retry sends again", p)
		require.Len(t, b.sim.Messages(Filter{Provider: p, Key: "k"}), 2)
	}
}

// Sendy's 500 after the send took effect and its answer was stored: the
// retry with the key is answered by the replay, and one message exists.
func TestFaultCommitted5xx(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fault(t, Fault{Kind: Committed5xx, Provider: Sendy})
	require.Equal(t, http.StatusInternalServerError, b.sendy("k").status)
	require.Len(t, b.sim.Messages(Filter{Provider: Sendy, Key: "k"}), 1, "the send took effect")
	again := b.sendy("k")
	require.Equal(t, http.StatusOK, again.status, "the stored answer is replayed")
	require.True(t, b.sim.Requests(Filter{Provider: Sendy})[1].Replay)
	require.Len(t, b.sim.Messages(Filter{Provider: Sendy, Key: "k"}), 1)
	require.Equal(t, string(Committed5xx), b.sim.Requests(Filter{Provider: Sendy})[0].Fault)
	require.ErrorContains(t, Fault{Kind: Committed5xx, Provider: Bird}.Validate(), "only in Sendy's contract")
}

func TestFaultHangHoldsTheLock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fault(t, Fault{Kind: Hang, Provider: Bird, Delay: Duration(time.Second)})
	slow := b.do("POST", birdPath, "k", birdBody, 200*time.Millisecond)
	require.Error(t, slow.err, "the client timed out")
	during := b.bird("k")
	require.Equal(t, http.StatusConflict, during.status)
	require.Equal(t, "E01004", birdCode(during))
	require.Eventually(t, func() bool { return len(b.sim.Messages(Filter{Key: "k"})) == 1 }, 3*time.Second, 10*time.Millisecond)
	require.Equal(t, "true", b.bird("k").header.Get("Idempotency-Replay"))

	// The lock follows the simulator clock: moved past 30 s, it no longer holds.
	b.fault(t, Fault{Kind: Hang, Provider: Bird, Delay: Duration(time.Second)})
	require.Error(t, b.do("POST", birdPath, "k2", birdBody, 200*time.Millisecond).err)
	b.sim.Advance(31 * time.Second)
	require.Equal(t, http.StatusAccepted, b.bird("k2").status, "expired lock, nothing stored: a second execution")
	require.Eventually(t, func() bool { return len(b.sim.Messages(Filter{Key: "k2"})) == 2 }, 3*time.Second, 10*time.Millisecond)
}

func TestFaultHangOnSendyMakesRetriesWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fault(t, Fault{Kind: Hang, Provider: Sendy, Delay: Duration(500 * time.Millisecond)})
	require.Error(t, b.do("POST", sendyPath, "k", sendyBody, 100*time.Millisecond).err)
	start := time.Now()
	waited := b.sendy("k")
	require.Equal(t, http.StatusOK, waited.status, "the waiting retry gets the replay")
	require.Greater(t, time.Since(start), 200*time.Millisecond)
	require.Len(t, b.sim.Messages(Filter{Key: "k"}), 1)
}

func TestFaultLockExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fault(t, Fault{Kind: LockExpiry, Provider: Bird, Delay: Duration(400 * time.Millisecond)})
	require.Error(t, b.do("POST", birdPath, "k", birdBody, 100*time.Millisecond).err)
	require.Equal(t, http.StatusAccepted, b.bird("k").status)
	require.Eventually(t, func() bool { return len(b.sim.Messages(Filter{Key: "k"})) == 2 }, 3*time.Second, 10*time.Millisecond)
}

func TestFaultsAnsweredBeforeExecution(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		provider string
		kind     Kind
		status   int
		code     string
	}{
		{Bird, Error5xx, 500, "E00500"},
		{Bird, Unavailable, 503, "E01033"},
		{Bird, RateLimit, 429, "E00429"},
		{Bird, InProgress, 409, "E01004"},
		{Sendy, Error5xx, 500, "INTERNAL"},
		{Sendy, Unavailable, 503, "SERVICE_UNAVAILABLE"},
		{Sendy, RateLimit, 429, "RATE_LIMITED"},
	} {
		b := setup(t)
		b.fault(t, Fault{Kind: tc.kind, Provider: tc.provider, Delay: Duration(3 * time.Second)})
		var a answer
		if tc.provider == Bird {
			a = b.bird("k")
			require.Equal(t, tc.code, birdCode(a))
		} else {
			a = b.sendy("k")
			require.Equal(t, tc.code, sendyCode(a))
		}
		require.Equal(t, tc.status, a.status, "%s %s", tc.provider, tc.kind)
		if tc.kind == RateLimit {
			require.Equal(t, "3", a.header.Get("Retry-After"))
		}
		require.Empty(t, b.sim.Messages(Filter{}), "%s %s: nothing was sent", tc.provider, tc.kind)
	}
}

func TestFaultDeliveryOutcomes(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.DeliveryDelay = time.Minute })
	b.fault(t, Fault{Kind: FailDelivery, Provider: Bird, Key: "bird-fail"})
	b.fault(t, Fault{Kind: FailDelivery, Provider: Sendy, Key: "sendy-fail"})
	b.fault(t, Fault{Kind: Undeliver, Provider: Sendy, Key: "sendy-undelivered"})
	for _, k := range []string{"bird-ok", "bird-fail"} {
		require.Equal(t, http.StatusAccepted, b.bird(k).status)
	}
	for _, k := range []string{"sendy-ok", "sendy-fail", "sendy-undelivered"} {
		require.Equal(t, http.StatusAccepted, b.do("POST", sendyPath, k, strings.Replace(sendyBody, "58213", k, 1), time.Second).status)
	}
	status := func(key string) string { return b.sim.Messages(Filter{Key: key})[0].Status }
	require.Equal(t, "accepted", status("bird-ok"))
	require.Equal(t, "queued", status("sendy-ok"))
	b.sim.Advance(40 * time.Second)
	require.Equal(t, "sent", status("bird-ok"))
	require.Equal(t, "sent", status("sendy-ok"))
	b.sim.Advance(20 * time.Second)
	for key, want := range map[string]string{
		"bird-ok": "delivered", "bird-fail": "failed",
		"sendy-ok": "delivered", "sendy-fail": "failed", "sendy-undelivered": "undelivered",
	} {
		require.Equal(t, want, status(key), key)
	}
	failed := b.sim.Messages(Filter{Key: "sendy-fail"})[0]
	require.Equal(t, failed.Credits, failed.CreditsRefunded, "never accepted by the network: refunded")
	require.Zero(t, b.sim.Messages(Filter{Key: "sendy-undelivered"})[0].CreditsRefunded)
}

func TestFaultsByRate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fault(t, Fault{Kind: Error5xx, Provider: Bird, Rate: 0.5})
	failures := 0
	for i := 0; i < 200; i++ {
		if b.do("POST", birdPath, "", birdBody, time.Second).status == 500 {
			failures++
		}
	}
	require.InDelta(t, 100, failures, 30, "about half of the requests fail")
	require.Len(t, b.sim.Faults(), 1, "a rate rule stays until cleared")
	b.sim.ClearFaults()
	require.Empty(t, b.sim.Faults())
}

func TestFaultValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for f, want := range map[*Fault]string{
		{Kind: "meteor"}:                              "is not known: use one of",
		{Kind: InProgress, Provider: Sendy}:           `only in Bird's contract`,
		{Kind: LockExpiry}:                            `only in Bird's contract`,
		{Kind: Undeliver, Provider: Bird}:             `only in Sendy's contract`,
		{Kind: Error5xx, Rate: 2}:                     "not a probability",
		{Kind: Error5xx, Rate: 0.5, Count: 2}:         "not both",
		{Kind: Error5xx, Provider: "twilio"}:          "is not known",
		{Kind: Hang, Delay: Duration(-time.Second)}:   "negative",
		{Kind: Error5xx, Count: -1, Provider: Sendy}:  "count",
		{Kind: RateLimit, Provider: Bird, Rate: -0.1}: "not a probability",
	} {
		require.ErrorContains(t, b.sim.AddFault(*f), want)
	}
}

func TestAdminAPI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	post := func(path, body string) map[string]any {
		resp, err := http.Post(b.srv.URL+path, "application/json", bytes.NewBufferString(body))
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		var m map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
		require.Equal(t, http.StatusOK, resp.StatusCode, m)
		return m
	}
	get := func(path string) map[string]any {
		resp, err := http.Get(b.srv.URL + path)
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		var m map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
		return m
	}

	faults := post("/_sim/faults", `[{"kind":"unavailable","provider":"bird","count":1},{"kind":"hang","provider":"sendy","delay":"2s","key":"x"}]`)
	require.Len(t, faults["faults"], 2)
	require.Equal(t, http.StatusServiceUnavailable, b.bird("k").status)
	require.Equal(t, http.StatusAccepted, b.bird("k").status)

	msgs := get("/_sim/messages?provider=bird&key=k")["messages"].([]any)
	require.Len(t, msgs, 1)
	m := msgs[0].(map[string]any)
	require.Equal(t, "+31612345678", m["to"])
	require.Equal(t, "k", m["key"])
	require.Equal(t, "Order 58213 has shipped.", m["text"])

	reqs := get("/_sim/requests?key=k")["requests"].([]any)
	require.Len(t, reqs, 2)
	first := reqs[0].(map[string]any)
	require.Equal(t, "unavailable", first["fault"])
	require.EqualValues(t, 503, first["status"])
	require.Equal(t, birdBody, first["bodyText"])

	before := b.sim.Now()
	moved := post("/_sim/clock", `{"advance":"3h"}`)
	at, err := time.Parse(time.RFC3339Nano, moved["now"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, before.Add(3*time.Hour), at, time.Minute)

	resp, err := http.Post(b.srv.URL+"/_sim/faults", "application/json", strings.NewReader(`{"kind":"meteor"}`))
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)

	req, _ := http.NewRequest(http.MethodDelete, b.srv.URL+"/_sim/faults", nil)
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Empty(t, b.sim.Faults())

	post("/_sim/reset", ``)
	require.Empty(t, b.sim.Messages(Filter{}))
	require.Empty(t, b.sim.Requests(Filter{}))
	require.WithinDuration(t, time.Now(), b.sim.Now(), time.Minute, "the clock is back")
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	_, err := New(Config{FailRate: 0.7, UndeliveredRate: 0.5})
	require.ErrorContains(t, err, "add up to at most 1")
	_, err = New(Config{LockExpiry: -time.Second})
	require.ErrorContains(t, err, "negative")
}

func TestFaultFlag(t *testing.T) {
	t.Parallel()
	var f FaultFlag
	require.NoError(t, f.Set("error_5xx=0.1@bird"))
	require.NoError(t, f.Set("drop_after_commit=0.05"))
	require.Equal(t, Fault{Kind: Error5xx, Provider: Bird, Rate: 0.1}, f[0])
	require.ErrorContains(t, f.Set("error_5xx"), "kind=rate[@provider]")
	require.ErrorContains(t, f.Set("error_5xx=lots"), "not a number")
}

func TestListenServesAndCloses(t *testing.T) {
	t.Parallel()
	sim, err := New(Config{})
	require.NoError(t, err)
	l, err := sim.Listen("127.0.0.1:0")
	require.NoError(t, err)
	resp, err := http.Get(l.URL + "/_sim/clock")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, l.Close())
	_, err = sim.Listen(strings.TrimPrefix(l.URL, "http://") + "x")
	require.ErrorContains(t, err, "cannot listen")
}

// A slow delivery takes its fault's delay instead of the simulator's.
func TestFaultSlowDelivery(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.DeliveryDelay = time.Minute })
	b.fault(t, Fault{Kind: SlowDelivery, Provider: Bird, Key: "bird-slow", Delay: Duration(time.Hour)})
	b.fault(t, Fault{Kind: SlowDelivery, Provider: Sendy, Key: "sendy-slow", Delay: Duration(time.Hour)})
	for _, k := range []string{"bird-ok", "bird-slow"} {
		require.Equal(t, http.StatusAccepted, b.bird(k).status)
	}
	for _, k := range []string{"sendy-ok", "sendy-slow"} {
		require.Equal(t, http.StatusAccepted, b.do("POST", sendyPath, k, strings.Replace(sendyBody, "58213", k, 1), time.Second).status)
	}
	status := func(key string) string { return b.sim.Messages(Filter{Key: key})[0].Status }
	b.sim.Advance(2 * time.Minute)
	require.Equal(t, "delivered", status("bird-ok"))
	require.Equal(t, "delivered", status("sendy-ok"))
	require.Equal(t, "accepted", status("bird-slow"), "2 minutes into an hour's delivery")
	require.Equal(t, "queued", status("sendy-slow"), "2 minutes into an hour's delivery")
	b.sim.Advance(time.Hour)
	require.Equal(t, "delivered", status("bird-slow"))
	require.Equal(t, "delivered", status("sendy-slow"))
}

// LookupsDown fails the reads of its key's messages (a lookup, and a page
// of Bird's list that holds one) with a 503, leaves other keys' reads and
// every send alone, and ends when its rule is cleared.
func TestFaultLookupsDown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.fault(t, Fault{Kind: LookupsDown, Key: "down", Rate: 1})
	sent := b.bird("down")
	require.Equal(t, http.StatusAccepted, sent.status, "sends are not touched")
	require.Equal(t, http.StatusAccepted, b.bird("up").status)
	down := b.sim.Messages(Filter{Key: "down"})[0].ID
	up := b.sim.Messages(Filter{Key: "up"})[0].ID

	got := b.do("GET", birdPath+"/"+down, "", "", time.Second)
	require.Equal(t, http.StatusServiceUnavailable, got.status)
	require.Equal(t, "E00503", birdCode(got))
	require.Equal(t, http.StatusOK, b.do("GET", birdPath+"/"+up, "", "", time.Second).status, "another key's message reads")
	require.Equal(t, http.StatusServiceUnavailable, b.do("GET", birdPath+"?limit=100", "", "", time.Second).status, "the page holds the key's message")
	require.Equal(t, http.StatusNotFound, b.do("GET", birdPath+"/no-such-id", "", "", time.Second).status, "an unknown id is still not found")

	require.Equal(t, http.StatusAccepted, b.do("POST", sendyPath, "down", sendyBody, time.Second).status)
	sendyDown := b.sim.Messages(Filter{Provider: Sendy, Key: "down"})[0].ID
	got = b.do("GET", sendyPath+"/"+sendyDown, "", "", time.Second)
	require.Equal(t, http.StatusServiceUnavailable, got.status)
	require.Equal(t, "SERVICE_UNAVAILABLE", sendyCode(got))

	b.fault(t, Fault{Kind: LookupsDown, Key: "up", Rate: 1})
	b.sim.ClearFaultsFor("down")
	require.Equal(t, http.StatusOK, b.do("GET", birdPath+"/"+down, "", "", time.Second).status, "the key's rule cleared, its message reads")
	require.Equal(t, http.StatusServiceUnavailable, b.do("GET", birdPath+"/"+up, "", "", time.Second).status, "another key's rule stays")
	b.sim.ClearFaultsFor("up")
	require.Equal(t, http.StatusOK, b.do("GET", birdPath+"?limit=100", "", "", time.Second).status)
}
