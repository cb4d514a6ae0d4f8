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

// A line of the setting that is commented out stays out, all of it: an
// operator who disables "shop:…, ops:*:…" by putting # before it must
// not find the second entry (every kind) still accepted.
func TestReviewACommentedOutLineEnablesNoEntry(t *testing.T) {
	got, err := ParseSenders("# retired: shop:order:old-shop-secret-0123456789, ops:*:old-ops-secret-0123456789\nshop:order:new-shop-secret-0123456789")
	require.NoError(t, err)
	for _, s := range got {
		require.NotEqual(t, "ops", s.Name, "the commented-out sender ops (every kind) is accepted: %+v", got)
	}
	require.Len(t, got, 1)
}

// The kinds a sender may be limited to are the kinds a key can have:
// keys.Event takes "user_invite" (letters, digits and '_'), so a sender
// of invitations must be limitable to it rather than be given '*'.
func TestReviewAKindWithAnUnderscoreCanBeASendersKind(t *testing.T) {
	got, err := ParseSenders("invites:user_invite:invites-secret-0123456789abcdef")
	require.NoError(t, err)
	require.Equal(t, []Sender{{Name: "invites", Secret: "invites-secret-0123456789abcdef", Kinds: []string{"user_invite"}}}, got)
}

// A named sender's budget is its own: requests signed with the shared
// secret, from any client address, do not spend it. Behind the named
// proxy the client address is taken from X-Forwarded-For as written, so
// a shared-secret caller who writes "sender shop" there spends the
// shop's bucket and the shop gets 429 on its first request.
func TestReviewASharedSecretCallerCannotSpendANamedSendersBudget(t *testing.T) {
	t.Parallel()
	now := time.Now()
	_, lo, err := net.ParseCIDR("127.0.0.1/32")
	require.NoError(t, err)
	h := New(starter.New(nil), Config{
		Secrets:       []logging.Secret{"shared-secret"},
		Senders:       []Sender{{Name: "shop", Secret: "shop-secret", Kinds: []string{"order"}}},
		Proxies:       []*net.IPNet{lo},
		RatePerMinute: 60,
		Now:           func() time.Time { return now },
	})
	send := func(header map[string]string, xff string) int {
		req := httptest.NewRequest(http.MethodPost, "/v1/events", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		req.RemoteAddr = "127.0.0.1:4000"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	// The shared-secret caller uses up a burst (6) under the name "sender shop".
	for i := range 6 {
		require.Equal(t, http.StatusBadRequest, send(Sign("shared-secret", now, []byte(`{}`)), "sender shop"), "shared request %d", i)
	}
	require.Equal(t, http.StatusBadRequest, send(SignAs("shop", "shop-secret", now, []byte(`{}`)), "203.0.113.9"),
		"the shop's first request of the minute is refused for a budget others spent")
}
