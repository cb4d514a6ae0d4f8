package intake

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/starter"
)

// These requests are all answered before Temporal is reached, so the
// starter needs no client; the integration tests cover the rest.
func post(t *testing.T, h http.Handler, body string, header map[string]string) (int, Problem) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/events", strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var p Problem
	_ = json.Unmarshal(rec.Body.Bytes(), &p)
	return rec.Code, p
}

const event = `{"kind":"order","id":"58213","stage":"shipped","to":"+31612345678","text":"Order 58213 has shipped.","provider":"bird"}`

func TestSignatureIsRequiredWhenASecretIsSet(t *testing.T) {
	t.Parallel()
	h := New(starter.New(nil), Config{Secret: "shared-secret"})
	for name, sig := range map[string]string{
		"unsigned":         "",
		"wrong secret":     Sign("other", []byte(event)),
		"other body":       Sign("shared-secret", []byte(event+" ")),
		"not even a value": "yes please",
	} {
		code, p := post(t, h, event, map[string]string{SignatureHeader: sig})
		require.Equal(t, http.StatusUnauthorized, code, name)
		require.Equal(t, "unauthorized", p.Error.Code, name)
		require.Contains(t, p.Error.Message, "HMAC-SHA256", name)
	}
	// A correctly signed but invalid event gets past the signature check.
	bad := strings.Replace(event, "+31612345678", "0612345678", 1)
	code, p := post(t, h, bad, map[string]string{SignatureHeader: Sign("shared-secret", []byte(bad))})
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "to", p.Error.Field)
}

func TestBadRequestsSayWhatToFix(t *testing.T) {
	t.Parallel()
	h := New(starter.New(nil), Config{MaxBody: 1024})
	for _, tc := range []struct {
		name, body   string
		status       int
		code, field  string
		messageHints string
	}{
		{"not JSON", `order shipped`, 400, "bad_json", "", `send {"kind":"order"`},
		{"misspelt field", strings.Replace(event, `"to"`, `"recipient"`, 1), 400, "bad_json", "", `unknown field "recipient"`},
		{"no country code", strings.Replace(event, "+31612345678", "0612345678", 1), 400, "invalid", "to", "international form"},
		{"empty text", strings.Replace(event, "Order 58213 has shipped.", "", 1), 400, "invalid", "text", "write the message"},
		{"key with a space", `{"key":"order 58213","to":"+31612345678","text":"x","provider":"bird"}`, 400, "invalid", "key", "without spaces"},
		{"unknown provider", strings.Replace(event, "bird", "pigeon", 1), 400, "invalid", "provider", `use "bird" or "sendy"`},
		{"too large", `{"text":"` + strings.Repeat("x", 2000) + `"}`, 413, "too_large", "", "larger than 1024 bytes"},
	} {
		code, p := post(t, h, tc.body, nil)
		require.Equal(t, tc.status, code, tc.name)
		require.Equal(t, tc.code, p.Error.Code, tc.name)
		require.Equal(t, tc.field, p.Error.Field, tc.name)
		require.Contains(t, p.Error.Message, tc.messageHints, tc.name)
	}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	h := New(starter.New(nil), Config{})
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/healthz", 200},
		{http.MethodGet, "/v1/events", 405},
		{http.MethodDelete, "/v1/events/order-1-shipped", 405},
		{http.MethodGet, "/v1/events/order%201", 400},
		{http.MethodGet, "/nope", 404},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		require.Equal(t, tc.want, rec.Code, "%s %s", tc.method, tc.path)
	}
}
