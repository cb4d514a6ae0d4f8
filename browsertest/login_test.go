package browsertest

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/app"
	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/internal/freeport"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/internal/pki"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/starter"
)

// person is someone the local OpenID Connect provider logs in, with the
// roles their ID token names.
type person struct {
	*mockoidc.MockUser
	roles []string
}

func (p person) Claims(scope []string, claims *mockoidc.IDTokenClaims) (jwt.Claims, error) {
	base, err := p.MockUser.Claims(scope, claims)
	if err != nil {
		return nil, err
	}
	return withRoles{base, p.roles}, nil
}

// withRoles adds the roles claim to the provider's own claims.
type withRoles struct {
	jwt.Claims
	roles []string
}

func (w withRoles) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(w.Claims)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if len(w.roles) > 0 {
		m["smsorch_roles"] = w.roles
	}
	return json.Marshal(m)
}

// The web UI behind an OpenID Connect login, against a local provider:
// its API refuses a request without a session; a person who logs in
// sees the runs, and Temporal decides what they may do by the roles of
// their own ID token, not the UI's certificate: a person whose token
// names no role sees the server's refusal.
func TestTheWebUILogsPeopleInAndActsWithTheirOwnToken(t *testing.T) {
	idp, err := mockoidc.Run()
	require.NoError(t, err)
	t.Cleanup(func() { _ = idp.Shutdown() })
	oidc := idp.Config()

	dir := t.TempDir()
	files, err := pki.Generate(filepath.Join(dir, "pki"), []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, "admin", pki.RoleAdmin)
	require.NoError(t, err)
	port, err := freeport.Low("127.0.0.1")
	require.NoError(t, err)
	uiAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cfg := app.Config{
		Dev: true, DataDir: dir, FrontendAddress: "127.0.0.1:0", UIAddress: uiAddr,
		SimulatorAddress: "127.0.0.1:0", IntakeAddress: app.Off,
		Simulator:       simulator.Config{DeliveryDelay: 100 * time.Millisecond},
		AttemptTimeout:  policy.AttemptTimeout,
		Policies:        map[provider.Name]activities.Policy{provider.Bird: policy, provider.Sendy: policy},
		TemporalTLSCert: files.ServerCert, TemporalTLSKey: files.ServerKey, TemporalTLSCA: files.CA,
		TemporalAPIKeysJWKS: idp.JWKSEndpoint(), TemporalAPIKeysIssuer: idp.Issuer(), TemporalAPIKeysAudience: oidc.ClientID,
		UIOIDCIssuer: idp.Issuer(), UIOIDCClientID: oidc.ClientID, UIOIDCClientSecret: logging.Secret(oidc.ClientSecret),
		UIOIDCCallbackURL: "http://" + uiAddr + "/auth/sso/callback",
	}
	require.NoError(t, cfg.WithDefaults().Validate())
	a, err := app.Start(context.Background(), cfg, zap.NewNop())
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Stop() })
	st := starter.New(a.Client)
	_, err = st.Send(context.Background(), starter.Event{Key: "order-7-shipped", Provider: "bird", To: "+31612345678", Text: "Order 7 has shipped."})
	require.NoError(t, err)
	res, err := st.Wait(context.Background(), "order-7-shipped")
	require.NoError(t, err)
	require.Equal(t, contract.Delivered, res.State)

	// No session: the UI's API answers 401, before Temporal is asked.
	ui := a.Stack.UIURL()
	resp, err := http.Get(ui + "/api/v1/namespaces/default/workflows")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the UI's API without a login")
	// The UI server's raw history download would reach Temporal as the
	// UI itself, without a person: behind the login it is off.
	resp, err = http.Get(ui + "/api/v1/namespaces/default/workflows/order-7-shipped/run//history.json")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "the raw history without a login")

	// An operator logs in (the provider logs the queued person in at
	// once) and sees the run.
	idp.QueueUser(person{&mockoidc.MockUser{Subject: "ops-ana", Email: "ana@example.com", EmailVerified: true}, []string{"smsorch-operator"}})
	ctx := browser(t)
	list := ui + "/namespaces/default/workflows"
	page(t, ctx, list, "5-login-operator.png", "order-7-shipped")

	// Temporal decides what each person may do by the roles of their own
	// ID token, which the UI passes on, not by the UI's certificate: the
	// UI's API, asked with the token of someone whose token names no
	// role, answers with the server's refusal; with the operator's, the run.
	for _, c := range []struct {
		who   person
		code  int
		shows string
	}{
		{person{&mockoidc.MockUser{Subject: "guest-bo"}, nil}, http.StatusForbidden, "names no role"},
		{person{&mockoidc.MockUser{Subject: "ops-ana"}, []string{"smsorch-operator"}}, http.StatusOK, "order-7-shipped"},
	} {
		token := idToken(t, idp, c.who, "http://"+uiAddr+"/auth/sso/callback")
		req, err := http.NewRequest(http.MethodGet, ui+"/api/v1/namespaces/default/workflows", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Authorization-Extras", token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.Equal(t, c.code, resp.StatusCode, "%s: %s", c.who.Subject, b)
		require.Contains(t, string(b), c.shows, c.who.Subject)
	}
}

// idToken logs who in at the provider as the UI would, without a
// browser: the authorization code for the UI's client, exchanged for the
// person's ID token.
func idToken(t *testing.T, idp *mockoidc.MockOIDC, who mockoidc.User, callback string) string {
	t.Helper()
	cfg := idp.Config()
	idp.QueueUser(who)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	q := url.Values{"client_id": {cfg.ClientID}, "redirect_uri": {callback}, "response_type": {"code"}, "scope": {"openid profile email"}, "state": {"s"}}
	resp, err := noRedirect.Get(idp.AuthorizationEndpoint() + "?" + q.Encode())
	require.NoError(t, err)
	_ = resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(t, err, "the provider sends the browser back")
	code := loc.Query().Get("code")
	require.NotEmpty(t, code, "with a code: %s", loc)
	resp, err = http.PostForm(idp.TokenEndpoint(), url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {callback},
		"client_id": {cfg.ClientID}, "client_secret": {cfg.ClientSecret}})
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	var tok struct {
		IDToken string `json:"id_token"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&tok))
	require.NotEmpty(t, tok.IDToken)
	return tok.IDToken
}
