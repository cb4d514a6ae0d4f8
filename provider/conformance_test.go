package provider_test

// The conformance suite: each client against the simulator, over every row
// of both providers' tables in docs/providers.md. Each test counts the messages
// the simulator created, which is the only count of real sends.

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/provider/bird"
	"github.com/acme/smsorch/provider/sendy"
)

const (
	to   = "+31612345678"
	text = "Order 58213 has shipped."
)

type bundle struct {
	sim   *simulator.Server
	url   string
	bird  *bird.Client
	sendy *sendy.Client
}

// setup starts a simulator and a client of each provider against it. The
// clients' per-attempt timeout is short so Hang faults outlast it.
func setup(t *testing.T, mutate ...func(*simulator.Config)) bundle {
	t.Helper()
	cfg := simulator.Config{Seed: 1, DeliveryDelay: time.Minute}
	for _, m := range mutate {
		m(&cfg)
	}
	sim, err := simulator.New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(sim.Handler())
	t.Cleanup(srv.Close)
	return bundle{sim: sim, url: srv.URL}.withTimeout(t, 300*time.Millisecond)
}

// withTimeout is b with clients whose per-attempt timeout is d.
func (b bundle) withTimeout(t *testing.T, d time.Duration) bundle {
	t.Helper()
	var err error
	b.bird, err = bird.New(bird.Config{BaseURL: b.url, AccessKey: simulator.DefaultBirdAccessKey, WorkspaceID: "ws-1", ChannelID: "ch-sms", Timeout: d})
	require.NoError(t, err)
	b.sendy, err = sendy.New(sendy.Config{BaseURL: b.url, Token: simulator.DefaultSendyToken, Sender: "MyShop", Timeout: d})
	require.NoError(t, err)
	return b
}

func (b bundle) client(p provider.Name) provider.Client {
	if p == provider.Bird {
		return b.bird
	}
	return b.sendy
}

func (b bundle) messages(p provider.Name, key string) []simulator.Message {
	return b.sim.Messages(simulator.Filter{Provider: string(p), Key: key})
}

func plan(t *testing.T, c provider.Client, key string) provider.Request {
	t.Helper()
	req, err := c.Plan(key, to, "", text)
	require.NoError(t, err)
	return req
}

// sameBytes asserts that every send request the simulator received for a
// key carried the identical body.
func sameBytes(t *testing.T, b bundle, p provider.Name, key string, want []byte) {
	t.Helper()
	reqs := b.sim.Requests(simulator.Filter{Provider: string(p), Key: key})
	require.NotEmpty(t, reqs)
	for _, r := range reqs {
		if r.Method == http.MethodPost {
			require.True(t, bytes.Equal(want, r.Body), "attempt %d sent %q, want %q", r.Seq, r.Body, want)
		}
	}
}

var both = []provider.Name{provider.Bird, provider.Sendy}

func TestNewSendThenReplay(t *testing.T) {
	t.Parallel()
	for _, p := range both {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			c := b.client(p)
			req := plan(t, c, "order-58213-shipped")
			ctx := context.Background()

			first := c.Send(ctx, req)
			require.Equal(t, provider.Accepted, first.Outcome, first.Reason)
			require.Equal(t, http.StatusAccepted, first.HTTPStatus)
			require.NotEmpty(t, first.MessageID)

			again := c.Send(ctx, req)
			require.Equal(t, provider.Replayed, again.Outcome, again.Reason)
			require.Equal(t, first.MessageID, again.MessageID)
			require.Len(t, b.messages(p, req.Key), 1)
			sameBytes(t, b, p, req.Key, req.Body)

			if p == provider.Sendy {
				require.Equal(t, http.StatusOK, again.HTTPStatus, "Sendy tells a replay by 200")
				require.Equal(t, 1, first.Credits)
				require.Equal(t, first.Credits, again.Credits, "no second charge")
			} else {
				require.Equal(t, http.StatusAccepted, again.HTTPStatus, "Bird replays the stored status")
				reqs := b.sim.Requests(simulator.Filter{Provider: "bird", Key: req.Key})
				require.True(t, reqs[1].Replay, "the simulator answered with Idempotency-Replay: true")
			}
		})
	}
}

func TestBirdWhitespaceDifferenceIsKeyReuse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	req := plan(t, b.bird, "order-58213-shipped")
	require.Equal(t, provider.Accepted, b.bird.Send(ctx, req).Outcome)

	changed := req
	changed.Body = bytes.Replace(req.Body, []byte(`":`), []byte(`": `), 1) // same JSON, other bytes
	r := b.bird.Send(ctx, changed)
	require.Equal(t, provider.Rejected, r.Outcome)
	require.True(t, r.KeyConflict)
	require.Equal(t, bird.CodeKeyReuse, r.Code)
	require.Equal(t, http.StatusConflict, r.HTTPStatus)
	require.Contains(t, r.Reason, "bug in key assignment")
	require.Len(t, b.messages(provider.Bird, req.Key), 1)
}

func TestSendyKeyBoundToRecipientAndText(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	req := plan(t, b.sendy, "order-58213-shipped")
	require.Equal(t, provider.Accepted, b.sendy.Send(ctx, req).Outcome)

	// Other bytes, same recipient and text: Sendy binds the key to those, not the bytes.
	spaced := req
	spaced.Body = bytes.Replace(req.Body, []byte(`":`), []byte(`": `), 1)
	require.Equal(t, provider.Replayed, b.sendy.Send(ctx, spaced).Outcome)

	for name, other := range map[string]provider.Request{
		"another number": must(b.sendy.Plan(req.Key, "+31699999999", "", text)),
		"another text":   must(b.sendy.Plan(req.Key, to, "", "Order 58213 was cancelled.")),
	} {
		r := b.sendy.Send(ctx, other)
		require.Equal(t, provider.Rejected, r.Outcome, name)
		require.True(t, r.KeyConflict, name)
		require.Equal(t, sendy.CodeIdempotencyConflict, r.Code, name)
	}
	require.Len(t, b.messages(provider.Sendy, ""), 1, "nothing else was sent")
}

func must(r provider.Request, err error) provider.Request {
	if err != nil {
		panic(err)
	}
	return r
}

func TestConcurrentSendsOfOneKeyMakeOneMessage(t *testing.T) {
	t.Parallel()
	for _, p := range both {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			// A hundred concurrent attempts under -race on a loaded machine
			// outlasted the 300 ms that Hang faults need, and all ended
			// unknown: this test is about who sees the send, so it waits.
			b := setup(t, func(c *simulator.Config) { c.SendyRateLimit = -1 }).withTimeout(t, 10*time.Second)
			c := b.client(p)
			req := plan(t, c, "otp-8412-7")
			var wg sync.WaitGroup
			results := make([]provider.Result, 100)
			for i := range results {
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i] = c.Send(context.Background(), req)
				}()
			}
			wg.Wait()
			counts := map[provider.Outcome]int{}
			for _, r := range results {
				counts[r.Outcome]++
				require.Contains(t, []provider.Outcome{provider.Accepted, provider.Replayed, provider.InProgress, provider.Unknown}, r.Outcome, r.Reason)
			}
			require.Len(t, b.messages(p, req.Key), 1, "outcomes: %v", counts)
			require.Equal(t, 1, counts[provider.Accepted], "exactly one caller sees the new send: %v", counts)
			if p == provider.Sendy {
				require.Zero(t, counts[provider.InProgress], "Sendy lets the others wait and replays: %v", counts)
			}
			sameBytes(t, b, p, req.Key, req.Body)
		})
	}
}

func TestAfterRetentionTheKeySendsAgain(t *testing.T) {
	t.Parallel()
	for _, p := range both {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			c := b.client(p)
			req := plan(t, c, "order-58213-shipped")
			ctx := context.Background()
			first := c.Send(ctx, req)
			require.Equal(t, provider.Accepted, first.Outcome)

			b.sim.Advance(2*time.Hour + 59*time.Minute)
			require.Equal(t, provider.Replayed, c.Send(ctx, req).Outcome, "still inside the window")

			b.sim.Advance(2 * time.Minute)
			later := c.Send(ctx, req)
			require.Equal(t, provider.Accepted, later.Outcome, "past three hours the replay record is gone")
			require.NotEqual(t, first.MessageID, later.MessageID)
			require.Len(t, b.messages(p, req.Key), 2, "which is why the workflow reconciles before resending")
		})
	}
}

func TestDroppedAnswerAfterAcceptanceIsReplayed(t *testing.T) {
	t.Parallel()
	for _, p := range both {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			c := b.client(p)
			req := plan(t, c, "order-58213-shipped")
			require.NoError(t, b.sim.AddFault(simulator.Fault{Kind: simulator.DropAfterCommit, Provider: string(p)}))
			ctx := context.Background()

			lost := c.Send(ctx, req)
			require.Equal(t, provider.Unknown, lost.Outcome, lost.Reason)
			require.Zero(t, lost.HTTPStatus)
			require.Len(t, b.messages(p, req.Key), 1, "the send took effect")

			retry := c.Send(ctx, req)
			require.Equal(t, provider.Replayed, retry.Outcome, retry.Reason)
			require.Equal(t, b.messages(p, req.Key)[0].ID, retry.MessageID)
			require.Len(t, b.messages(p, req.Key), 1, "no second message")
			sameBytes(t, b, p, req.Key, req.Body)
		})
	}
}

func TestTimeoutThenReplay(t *testing.T) {
	t.Parallel()
	for _, p := range both {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			c := b.client(p)
			req := plan(t, c, "order-58213-shipped")
			require.NoError(t, b.sim.AddFault(simulator.Fault{Kind: simulator.Hang, Provider: string(p), Delay: simulator.Duration(1500 * time.Millisecond)}))
			ctx := context.Background()

			slow := c.Send(ctx, req)
			require.Equal(t, provider.Unknown, slow.Outcome)
			require.Contains(t, slow.Reason, "timed out")

			// While the first attempt still runs: Bird answers E01004, Sendy makes the retry wait.
			during := c.Send(ctx, req)
			if p == provider.Bird {
				require.Equal(t, provider.InProgress, during.Outcome, during.Reason)
				require.Equal(t, bird.CodeInProgress, during.Code)
			} else {
				// Sendy has no in-progress answer: the retry waits for the first
				// request, and either outlasts its own timeout or gets the replay.
				require.Contains(t, []provider.Outcome{provider.Unknown, provider.Replayed}, during.Outcome, during.Reason)
			}

			require.Eventually(t, func() bool { return len(b.messages(p, req.Key)) == 1 }, 5*time.Second, 20*time.Millisecond)
			require.Eventually(t, func() bool { return c.Send(ctx, req).Outcome == provider.Replayed }, 5*time.Second, 50*time.Millisecond)
			require.Len(t, b.messages(p, req.Key), 1)
			sameBytes(t, b, p, req.Key, req.Body)
		})
	}
}

func TestNotExecutedAndServerErrorsAreRetriedSafely(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p     provider.Name
		fault simulator.Kind
		want  provider.Outcome
		code  string
	}{
		{provider.Bird, simulator.Unavailable, provider.NotExecuted, bird.CodeUnavailable},
		{provider.Bird, simulator.Error5xx, provider.Unknown, ""},
		{provider.Sendy, simulator.Unavailable, provider.Unknown, ""},
		{provider.Sendy, simulator.Error5xx, provider.Unknown, ""},
	} {
		t.Run(string(tc.p)+"/"+string(tc.fault), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			c := b.client(tc.p)
			req := plan(t, c, "order-58213-shipped")
			require.NoError(t, b.sim.AddFault(simulator.Fault{Kind: tc.fault, Provider: string(tc.p)}))
			r := c.Send(context.Background(), req)
			require.Equal(t, tc.want, r.Outcome, r.Reason)
			require.GreaterOrEqual(t, r.HTTPStatus, 500)
			if tc.code != "" {
				require.Equal(t, tc.code, r.Code)
			}
			require.Empty(t, b.messages(tc.p, req.Key), "answered before execution")
			ok := c.Send(context.Background(), req)
			require.Equal(t, provider.Accepted, ok.Outcome)
			require.Len(t, b.messages(tc.p, req.Key), 1)
			sameBytes(t, b, tc.p, req.Key, req.Body)
		})
	}
}

func TestRateLimitedCarriesRetryAfter(t *testing.T) {
	t.Parallel()
	for _, p := range both {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			c := b.client(p)
			req := plan(t, c, "order-58213-shipped")
			require.NoError(t, b.sim.AddFault(simulator.Fault{Kind: simulator.RateLimit, Provider: string(p), Delay: simulator.Duration(7 * time.Second)}))
			r := c.Send(context.Background(), req)
			require.Equal(t, provider.RateLimited, r.Outcome)
			require.Equal(t, http.StatusTooManyRequests, r.HTTPStatus)
			require.Equal(t, 7*time.Second, r.RetryAfter)
			require.Empty(t, b.messages(p, req.Key))
		})
	}
}

func TestSendyRateLimitOfSixtyAMinute(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for i := 0; i < simulator.DefaultSendyRateLimit; i++ {
		r := b.sendy.Send(ctx, plan(t, b.sendy, "otp-8412-"+string(rune('a'+i%26))+string(rune('a'+i/26))))
		require.Equal(t, provider.Accepted, r.Outcome, "request %d: %s", i+1, r.Reason)
	}
	r := b.sendy.Send(ctx, plan(t, b.sendy, "otp-8412-over"))
	require.Equal(t, provider.RateLimited, r.Outcome)
	require.Greater(t, r.RetryAfter, time.Duration(0))
	require.LessOrEqual(t, r.RetryAfter, time.Minute)
	b.sim.Advance(time.Minute)
	require.Equal(t, provider.Accepted, b.sendy.Send(ctx, plan(t, b.sendy, "otp-8412-over")).Outcome, "the window moved on")
}

func TestRejectedRequestsAreNeverRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("bird bad number", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		req, err := b.bird.Plan("order-1-shipped", "0612345678", "", text)
		require.NoError(t, err)
		r := b.bird.Send(ctx, req)
		require.Equal(t, provider.Rejected, r.Outcome)
		require.Equal(t, http.StatusBadRequest, r.HTTPStatus)
		require.Contains(t, r.Reason, "E.164")
	})
	t.Run("sendy bad number", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		req, err := b.sendy.Plan("order-1-shipped", "0612345678", "", text)
		require.NoError(t, err)
		r := b.sendy.Send(ctx, req)
		require.Equal(t, provider.Rejected, r.Outcome)
		require.Equal(t, http.StatusBadRequest, r.HTTPStatus)
	})
	t.Run("sendy no credit", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *simulator.Config) { c.SendyCredits = 1 })
		require.Equal(t, provider.Accepted, b.sendy.Send(ctx, plan(t, b.sendy, "otp-1-1")).Outcome)
		r := b.sendy.Send(ctx, plan(t, b.sendy, "otp-1-2"))
		require.Equal(t, provider.Rejected, r.Outcome)
		require.Equal(t, http.StatusPaymentRequired, r.HTTPStatus)
		require.Contains(t, r.Reason, "top up")
	})
	for _, p := range both {
		t.Run(string(p)+" wrong credentials", func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(c *simulator.Config) { c.BirdAccessKey, c.SendyToken = "other", "other" })
			r := b.client(p).Send(ctx, plan(t, b.client(p), "order-1-shipped"))
			require.Equal(t, provider.Rejected, r.Outcome)
			require.Equal(t, http.StatusUnauthorized, r.HTTPStatus)
			require.NotContains(t, r.Reason, simulator.DefaultBirdAccessKey)
			require.NotContains(t, r.Reason, simulator.DefaultSendyToken)
		})
	}
}

// The documented duplicate path: the send takes effect but its answer is
// not stored, so the retry sends again. The key cannot prevent it; the
// simulator shows two messages and Bird's list finds both by reference.
func TestUnstoredAnswerSendsTwice(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	req := plan(t, b.bird, "order-58213-shipped")
	require.NoError(t, b.sim.AddFault(simulator.Fault{Kind: simulator.Unstored, Provider: "bird"}))
	first := b.bird.Send(ctx, req)
	require.Equal(t, provider.Unknown, first.Outcome)
	second := b.bird.Send(ctx, req)
	require.Equal(t, provider.Accepted, second.Outcome, "a new send, not a replay")
	require.Len(t, b.messages(provider.Bird, req.Key), 2)

	now := b.sim.Now()
	listed, err := b.bird.List(ctx, now.Add(-time.Hour), now.Add(time.Minute))
	require.NoError(t, err)
	var withKey []string
	for _, m := range listed {
		if m.Reference == req.Key {
			withKey = append(withKey, m.ID)
		}
	}
	require.Len(t, withKey, 2, "both accepted ids are found by the key")
}

// Bird's in-flight lock expires within 30 s; its expiry says nothing about
// the first attempt, which may still take effect: two messages.
func TestBirdLockExpiryWhileFirstAttemptRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	req := plan(t, b.bird, "order-58213-shipped")
	require.NoError(t, b.sim.AddFault(simulator.Fault{Kind: simulator.LockExpiry, Provider: "bird", Delay: simulator.Duration(500 * time.Millisecond)}))
	require.Equal(t, provider.Unknown, b.bird.Send(ctx, req).Outcome)
	retry := b.bird.Send(ctx, req)
	require.Equal(t, provider.Accepted, retry.Outcome, "no lock, no record: the retry executes")
	require.Eventually(t, func() bool { return len(b.messages(provider.Bird, req.Key)) == 2 }, 5*time.Second, 20*time.Millisecond)
}

func TestBirdInProgressFault(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := plan(t, b.bird, "order-58213-shipped")
	require.NoError(t, b.sim.AddFault(simulator.Fault{Kind: simulator.InProgress, Provider: "bird"}))
	r := b.bird.Send(context.Background(), req)
	require.Equal(t, provider.InProgress, r.Outcome)
	require.Equal(t, bird.CodeInProgress, r.Code)
	require.Equal(t, provider.Accepted, b.bird.Send(context.Background(), req).Outcome)
}

func TestLookupsFollowDelivery(t *testing.T) {
	t.Parallel()
	for _, p := range both {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			c := b.client(p)
			ctx := context.Background()
			require.NoError(t, b.sim.AddFault(simulator.Fault{Kind: simulator.FailDelivery, Provider: string(p), Key: "order-2-shipped"}))
			ok := c.Send(ctx, plan(t, c, "order-1-shipped"))
			bad := c.Send(ctx, plan(t, c, "order-2-shipped"))

			m, err := c.Get(ctx, ok.MessageID)
			require.NoError(t, err)
			require.Equal(t, provider.StatusAccepted, m.Status)
			require.Equal(t, to, m.To)
			require.Equal(t, text, m.Text)

			b.sim.Advance(time.Minute)
			m, err = c.Get(ctx, ok.MessageID)
			require.NoError(t, err)
			require.Equal(t, provider.StatusDelivered, m.Status)
			m, err = c.Get(ctx, bad.MessageID)
			require.NoError(t, err)
			require.Equal(t, provider.StatusFailed, m.Status)
			if p == provider.Sendy {
				require.True(t, m.Refunded, "a message the network never took is refunded")
			}

			_, err = c.Get(ctx, "no-such-id")
			require.True(t, errors.Is(err, provider.ErrNotFound), "%v", err)
		})
	}
}

func TestBirdListPagesThroughTheWindow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	start := b.sim.Now()
	for i := 0; i < bird.ListPageSize+5; i++ {
		r := b.bird.Send(ctx, plan(t, b.bird, "otp-8412-n"+string(rune('a'+i%26))+string(rune('a'+i/26))))
		require.Equal(t, provider.Accepted, r.Outcome)
	}
	all, err := b.bird.List(ctx, start, b.sim.Now())
	require.NoError(t, err)
	require.Len(t, all, bird.ListPageSize+5)
	none, err := b.bird.List(ctx, start.Add(-2*time.Hour), start.Add(-time.Hour))
	require.NoError(t, err)
	require.Empty(t, none)
}
