// Package intake is the HTTP door for systems that are not Go: a shop's
// "order shipped" webhook, a cron. It speaks JSON and maps the starter's
// answers onto HTTP:
//
//	POST /v1/events      an Event  → 202 started, 200 existing run, 409 conflict, 400 invalid
//	GET  /v1/events/{key}          → the run's state and timeline
//	GET  /healthz                  → 200
//
// With a shared secret configured, every POST must carry
// X-Smsorch-Signature: sha256=<hex HMAC-SHA256 of the raw body>.
package intake

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/acme/smsorch/logging"
	"github.com/acme/smsorch/starter"
)

// SignatureHeader carries the body's HMAC when a secret is configured.
const SignatureHeader = "X-Smsorch-Signature"

// DefaultMaxBody bounds a request body; an event is a few hundred bytes.
const DefaultMaxBody = 64 << 10

// Config configures the handler.
type Config struct {
	// Secret, when set, makes the signature header mandatory.
	Secret logging.Secret
	// MaxBody bounds the request body; default DefaultMaxBody.
	MaxBody int64
	// Timeout bounds the work of one request; default 30 s.
	Timeout time.Duration
	Logger  *zap.Logger
}

type handler struct {
	s   *starter.Starter
	cfg Config
}

// New returns the intake's HTTP handler.
func New(s *starter.Starter, cfg Config) http.Handler {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	h := &handler{s: s, cfg: cfg}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/events", h.post)
	mux.HandleFunc("GET /v1/events/{key}", h.get)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	return mux
}

// Problem is the body of every error answer.
type Problem struct {
	Error struct {
		Code    string `json:"code"`
		Field   string `json:"field,omitempty"`
		Message string `json:"message"`
	} `json:"error"`
}

func (h *handler) fail(w http.ResponseWriter, status int, code, field, msg string) {
	var p Problem
	p.Error.Code, p.Error.Field, p.Error.Message = code, field, msg
	writeJSON(w, status, p)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (h *handler) post(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		h.fail(w, http.StatusRequestEntityTooLarge, "too_large", "", fmt.Sprintf("the body is larger than %d bytes; an event is a few hundred", h.cfg.MaxBody))
		return
	case err != nil:
		h.fail(w, http.StatusBadRequest, "bad_body", "", "could not read the body: "+err.Error())
		return
	}
	if h.cfg.Secret != "" && !validSignature(h.cfg.Secret, body, r.Header.Get(SignatureHeader)) {
		h.fail(w, http.StatusUnauthorized, "unauthorized", "", fmt.Sprintf("missing or wrong %s: send sha256=<hex HMAC-SHA256 of the raw body with the shared secret>", SignatureHeader))
		return
	}
	var e starter.Event
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields() // a misspelt field must not silently drop a value
	if err := dec.Decode(&e); err != nil {
		h.fail(w, http.StatusBadRequest, "bad_json", "", "the body is not an event: "+err.Error()+
			`; send {"kind":"order","id":"58213","stage":"shipped","to":"+31612345678","text":"…","provider":"bird"}`)
		return
	}
	res, err := h.s.Send(ctx, e)
	log := h.cfg.Logger.With(zap.String("key", res.Key), zap.String("to", logging.MaskPhone(strings.TrimSpace(e.To))))
	var ie *starter.InvalidError
	var ce *starter.ConflictError
	switch {
	case errors.As(err, &ie):
		log.Info("intake refused an invalid event", zap.String("field", ie.Field), zap.Error(err))
		h.fail(w, http.StatusBadRequest, "invalid", ie.Field, err.Error())
	case errors.As(err, &ce):
		log.Warn("intake refused a conflicting event", zap.Error(err))
		h.fail(w, http.StatusConflict, "conflict", ce.Field, err.Error())
	case err != nil:
		log.Error("intake could not start an event", zap.Error(err))
		h.fail(w, http.StatusServiceUnavailable, "unavailable", "", err.Error()+"; send the same event again: its key makes retries safe")
	case res.Started:
		log.Info("intake started an event", zap.String("run", res.RunID))
		writeJSON(w, http.StatusAccepted, res)
	default:
		log.Info("intake found the event's run", zap.String("run", res.RunID), zap.String("state", string(res.State)))
		writeJSON(w, http.StatusOK, res)
	}
}

func (h *handler) get(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	st, err := h.s.Status(ctx, r.PathValue("key"))
	var ie *starter.InvalidError
	switch {
	case errors.As(err, &ie):
		h.fail(w, http.StatusBadRequest, "invalid", ie.Field, err.Error())
	case errors.Is(err, starter.ErrNotFound):
		h.fail(w, http.StatusNotFound, "not_found", "", err.Error())
	case err != nil:
		h.fail(w, http.StatusServiceUnavailable, "unavailable", "", err.Error())
	default:
		writeJSON(w, http.StatusOK, st)
	}
}

// Sign returns the signature header value for a body: what a sender computes.
func Sign(secret logging.Secret, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret.Reveal()))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func validSignature(secret logging.Secret, body []byte, header string) bool {
	return hmac.Equal([]byte(Sign(secret, body)), []byte(strings.TrimSpace(header)))
}
