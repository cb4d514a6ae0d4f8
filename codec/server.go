package codec

import (
	"crypto/subtle"
	"net/http"
	"slices"
	"strings"

	"go.temporal.io/sdk/converter"

	"github.com/acme/smsorch/internal/logging"
)

// EnvToken holds the codec server's bearer token.
const EnvToken = "SMSORCH_CODEC_TOKEN"

// Handler is a codec server in the Temporal web UI's remote codec
// protocol: POST /encode and POST /decode with {"payloads": [...]}. Every
// request needs the token, as "Authorization: Bearer TOKEN" or as the
// first path segment (/TOKEN/decode), for a UI whose codec endpoint
// setting can hold a URL but no header. Browsers on the origins allowed
// (the UI's) may call it (CORS). Without a token nothing is served.
func Handler(k *Keyring, token logging.Secret, allowed func(origin string) bool) http.Handler {
	inner := converter.NewPayloadCodecHTTPHandler(k)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if origin := r.Header.Get("Origin"); origin != "" && allowed != nil && allowed(origin) {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Credentials", "true")
			h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
			h.Set("Access-Control-Allow-Headers", "Content-Type, X-Namespace, Authorization")
			h.Add("Vary", "Origin")
		}
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		path, ok := authorized(r, token)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="smsorch codec"`)
			http.Error(w, `{"error":"the codec server needs its token (Authorization: Bearer …)"}`, http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodPost || (path != "/encode" && path != "/decode") {
			http.Error(w, `{"error":"POST /encode or /decode"}`, http.StatusNotFound)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = path
		inner.ServeHTTP(w, r2)
	})
}

// authorized checks the token and returns the path without it.
func authorized(r *http.Request, token logging.Secret) (string, bool) {
	want := []byte(token.Reveal())
	if len(want) == 0 {
		return "", false
	}
	if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok &&
		subtle.ConstantTimeCompare([]byte(bearer), want) == 1 {
		return r.URL.Path, true
	}
	rest := strings.TrimPrefix(r.URL.Path, "/")
	first, tail, _ := strings.Cut(rest, "/")
	if subtle.ConstantTimeCompare([]byte(first), want) == 1 {
		return "/" + tail, true
	}
	return "", false
}

// Origins allows exactly the given origins.
func Origins(list ...string) func(string) bool {
	return func(origin string) bool { return slices.Contains(list, origin) }
}
