package intake

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/starter"
)

// Each named sender signs with its own secret and starts and reads only
// the events of its kinds; its requests spend its own budget, from
// whatever address they come.
func TestNamedSendersStartAndReadOnlyTheirKinds(t *testing.T) {
	t.Parallel()
	now := time.Now()
	h := New(starter.New(nil), Config{Senders: []Sender{
		{Name: "shop", Secret: "shop-secret-new", Kinds: []string{"order", "refund"}},
		{Name: "shop", Secret: "shop-secret-old", Kinds: []string{"order", "refund"}},
		{Name: "auth", Secret: "auth-secret", Kinds: []string{"otp"}},
	}, RatePerMinute: 60, Now: func() time.Time { return now }})
	// Invalid recipients: past the signature and the scope, the starter
	// refuses them before Temporal is called.
	order := strings.Replace(event, "+31612345678", "0612345678", 1)
	otp := `{"otpUser":"8412","otpAttempt":"7","to":"0612345678","text":"Your code is 123456","provider":"bird"}`
	as := func(name, secret, body string) map[string]string {
		return SignAs(name, logging.Secret(secret), now, []byte(body))
	}
	for _, secret := range []string{"shop-secret-new", "shop-secret-old"} {
		code, p := post(t, h, order, as("shop", secret, order))
		require.Equal(t, http.StatusBadRequest, code, "the shop's order, signed with %s: %s", secret, p.Error.Message)
		require.Equal(t, "to", p.Error.Field)
	}
	code, p := post(t, h, otp, as("shop", "shop-secret-new", otp))
	require.Equal(t, http.StatusForbidden, code, "the shop sends no one-time codes")
	require.Equal(t, "forbidden_kind", p.Error.Code)
	require.Equal(t, `the sender shop may start and read events of the kinds order, refund, not "otp": sign as the sender of that kind`, p.Error.Message)
	code, p = post(t, h, order, as("auth", "auth-secret", order))
	require.Equal(t, http.StatusForbidden, code, "the login service sends no order updates: %s", p.Error.Message)
	code, _ = post(t, h, otp, as("auth", "auth-secret", otp))
	require.Equal(t, http.StatusBadRequest, code, "its own kind")

	// A sender's name with another's secret, and a named sender's secret
	// without its name, authenticate no one.
	code, p = post(t, h, order, as("shop", "auth-secret", order))
	require.Equal(t, http.StatusUnauthorized, code)
	require.Contains(t, p.Error.Message, "sign with that sender's own secret")
	code, _ = post(t, h, order, Sign("shop-secret-new", now, []byte(order)))
	require.Equal(t, http.StatusUnauthorized, code)
	require.NotContains(t, p.Error.Message, "secret-new")

	// Reading: its kinds only.
	path := "/v1/events/otp-8412-7"
	code, p = do(h, http.MethodGet, path, "", as("shop", "shop-secret-new", "GET "+path))
	require.Equal(t, http.StatusForbidden, code, "the shop reads no one-time codes")
	require.Equal(t, "forbidden_kind", p.Error.Code)
	path = "/v1/events/order-1-ship%20ped"
	code, _ = do(h, http.MethodGet, path, "", as("shop", "shop-secret-new", "GET "+path))
	require.Equal(t, http.StatusBadRequest, code, "an order key: past the scope, to the starter, which refuses the space")
}

func TestANamedSendersBudgetIsItsOwnFromEveryAddress(t *testing.T) {
	t.Parallel()
	now := time.Now()
	h := New(starter.New(nil), Config{Senders: []Sender{{Name: "shop", Secret: "shop-secret"}, {Name: "auth", Secret: "auth-secret"}},
		RatePerMinute: 60, Now: func() time.Time { return now }})
	from := func(addr, name, secret string) int {
		req := httptest.NewRequest(http.MethodPost, "/v1/events", strings.NewReader(`{}`))
		for k, v := range SignAs(name, logging.Secret(secret), now, []byte(`{}`)) {
			req.Header.Set(k, v)
		}
		req.RemoteAddr = addr
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	// A burst of a tenth of the minute's budget, spread over addresses.
	for i := range 6 {
		require.Equal(t, http.StatusBadRequest, from([]string{"10.0.0.1:1", "10.0.0.2:1"}[i%2], "shop", "shop-secret"), "request %d", i)
	}
	require.Equal(t, http.StatusTooManyRequests, from("10.0.0.3:1", "shop", "shop-secret"), "a new address is no way around the sender's budget")
	require.Equal(t, http.StatusBadRequest, from("10.0.0.1:1", "auth", "auth-secret"), "another sender at the same address has its own")
}

func TestSendersAreReadFromTheirSettingAndWhatIsWrongIsSaid(t *testing.T) {
	t.Parallel()
	got, err := ParseSenders("# senders\nshop:order+refund:s1\n\nauth:otp:s2, ops:*:s3\nshop:order+refund:s1-next")
	require.NoError(t, err)
	require.Equal(t, []Sender{
		{Name: "shop", Secret: "s1", Kinds: []string{"order", "refund"}},
		{Name: "auth", Secret: "s2", Kinds: []string{"otp"}},
		{Name: "ops", Secret: "s3"},
		{Name: "shop", Secret: "s1-next", Kinds: []string{"order", "refund"}},
	}, got)
	none, err := ParseSenders("")
	require.NoError(t, err)
	require.Empty(t, none)
	_, err = ParseSenders("shop-order-very-secret,Shop:order:very-secret,auth:OTP:very-secret,cron:order:,shop:order:very-secret,shop:refund:very-secret")
	require.ErrorContains(t, err, "intake sender 1 is not NAME:KINDS:SECRET")
	require.ErrorContains(t, err, `intake sender 2: the name "Shop" is not lowercase`)
	require.ErrorContains(t, err, `intake sender auth: the kind "OTP" is not an event kind`)
	require.ErrorContains(t, err, "intake sender cron has no secret")
	require.ErrorContains(t, err, "intake sender shop is given twice with other kinds")
	require.NotContains(t, err.Error(), "very-secret", "no secret in the message")
	_, err = ParseSenders("shop:order:one-secret-for-two,auth:otp:one-secret-for-two")
	require.ErrorContains(t, err, "intake senders shop and auth have the same secret")
}
