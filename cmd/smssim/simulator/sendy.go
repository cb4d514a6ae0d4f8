package simulator

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// sendyKey serialises requests with one key (Sendy: concurrent requests
// with the same key end in one message) and holds the stored answer.
type sendyKey struct {
	mu       sync.Mutex
	to, text string
	msg      *Message
	storedAt time.Time
}

type sendyErr struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func sendyError(code, msg string) sendyErr {
	var e sendyErr
	e.Error.Code, e.Error.Message = code, msg
	return e
}

type sendyMessage struct {
	ID              string `json:"id"`
	Status          string `json:"status"`
	To              string `json:"to"`
	From            string `json:"from"`
	Body            string `json:"body"`
	CreditsCharged  int    `json:"credits_charged"`
	CreditsRefunded int    `json:"credits_refunded"`
	Refunded        bool   `json:"refunded"`
	CreatedAt       string `json:"created_at"`
}

func sendyView(m Message) sendyMessage {
	return sendyMessage{
		ID: m.ID, Status: m.Status, To: m.To, From: m.From, Body: m.Text,
		CreditsCharged: m.Credits, CreditsRefunded: m.CreditsRefunded, Refunded: m.CreditsRefunded > 0,
		CreatedAt: m.CreatedAt.Format(time.RFC3339Nano),
	}
}

// sendyCredits is one credit per started 201 characters.
func sendyCredits(text string) int {
	return (utf8.RuneCountInString(text) + 200) / 201
}

// sendyGate checks the token and the rate limit; it answers and returns
// false when the request must stop here.
func (s *Server) sendyGate(w http.ResponseWriter, rec *Request, r *http.Request) bool {
	if r.Header.Get("Authorization") != "Bearer "+s.cfg.SendyToken {
		writeJSON(w, http.StatusUnauthorized, sendyError("UNAUTHORIZED", "missing or invalid bearer token"))
		s.finish(rec, http.StatusUnauthorized, false, "", "")
		return false
	}
	if s.cfg.SendyRateLimit < 0 {
		return true
	}
	s.mu.Lock()
	now := s.nowLocked()
	window := now.Add(-time.Minute)
	s.sendyHits = slices.DeleteFunc(s.sendyHits, func(t time.Time) bool { return !t.After(window) })
	limited := len(s.sendyHits) >= s.cfg.SendyRateLimit
	var wait time.Duration
	if limited {
		wait = s.sendyHits[0].Sub(window)
	} else {
		s.sendyHits = append(s.sendyHits, now)
	}
	s.mu.Unlock()
	if limited {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(wait)))
		writeJSON(w, http.StatusTooManyRequests, sendyError("RATE_LIMITED", "more than "+strconv.Itoa(s.cfg.SendyRateLimit)+" requests a minute"))
		s.finish(rec, http.StatusTooManyRequests, false, "", "")
		return false
	}
	return true
}

// sendySend implements Sendy's send with its idempotency contract.
func (s *Server) sendySend(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	rec := s.record(r, Sendy, body)
	if !s.sendyGate(w, rec, r) {
		return
	}
	key := rec.Key
	fault, delay := s.pickFault(Sendy, key)
	answer := func(status int, v any, replay bool, msgID string) {
		writeJSON(w, status, v)
		s.finish(rec, status, replay, fault, msgID)
	}
	switch fault {
	case Unauthorized:
		answer(http.StatusUnauthorized, sendyError("UNAUTHORIZED", "missing or invalid bearer token"), false, "")
		return
	case Error5xx:
		answer(http.StatusInternalServerError, sendyError("INTERNAL", "internal error"), false, "")
		return
	case Unavailable:
		answer(http.StatusServiceUnavailable, sendyError("SERVICE_UNAVAILABLE", "service unavailable; the request was not executed"), false, "")
		return
	case RateLimit:
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(delay)))
		answer(http.StatusTooManyRequests, sendyError("RATE_LIMITED", "rate limited"), false, "")
		return
	}

	var req struct {
		To   string `json:"to"`
		From string `json:"from"`
		Body string `json:"body"`
		Mode string `json:"mode"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		answer(http.StatusBadRequest, sendyError("INVALID_REQUEST", "the body is not valid JSON"), false, "")
		return
	}
	switch {
	case !e164.MatchString(req.To):
		answer(http.StatusBadRequest, sendyError("INVALID_RECIPIENT", "to must be a phone number in E.164 format"), false, "")
		return
	case strings.TrimSpace(req.From) == "":
		answer(http.StatusBadRequest, sendyError("INVALID_SENDER", "from is required"), false, "")
		return
	case strings.TrimSpace(req.Body) == "":
		answer(http.StatusBadRequest, sendyError("INVALID_BODY", "body is required"), false, "")
		return
	case req.Mode != "" && req.Mode != "transactional":
		answer(http.StatusBadRequest, sendyError("INVALID_MODE", `mode must be "transactional" or absent`), false, "")
		return
	}

	var k *sendyKey
	if key != "" {
		s.mu.Lock()
		k = s.sendy[key]
		if k == nil {
			k = &sendyKey{}
			s.sendy[key] = k
		}
		s.mu.Unlock()
		k.mu.Lock()
		defer k.mu.Unlock()
		s.mu.Lock()
		now := s.nowLocked()
		if k.msg != nil && now.Before(k.storedAt.Add(s.cfg.SendyRetention)) {
			same := k.to == req.To && k.text == req.Body
			view := s.viewLocked(k.msg, now)
			s.mu.Unlock()
			if !same {
				answer(http.StatusConflict, sendyError("IDEMPOTENCY_CONFLICT", "this idempotency key was used with another recipient or body"), false, "")
				return
			}
			answer(http.StatusOK, sendyView(view), true, view.ID)
			return
		}
		s.mu.Unlock()
	}

	if fault == Hang {
		s.sleep(hangFor(delay))
	}

	s.mu.Lock()
	now := s.nowLocked()
	credits := sendyCredits(req.Body)
	switch {
	case req.Mode != "transactional" && slices.Contains(s.cfg.OptOut, req.To):
		s.mu.Unlock()
		answer(http.StatusForbidden, sendyError("RECIPIENT_OPTED_OUT", "the recipient opted out of marketing messages"), false, "")
		return
	case s.credits < credits:
		s.mu.Unlock()
		answer(http.StatusPaymentRequired, sendyError("INSUFFICIENT_CREDIT", "not enough credit for this message"), false, "")
		return
	}
	s.credits -= credits
	m := &Message{
		Provider: Sendy, ID: "msg_" + strings.ReplaceAll(s.newID(), "-", "")[:20], Key: key,
		To: req.To, From: req.From, Text: req.Body, Mode: req.Mode, CreatedAt: now, Credits: credits,
		final: s.finalStatusLocked(Sendy, fault), deliverIn: deliverIn(fault, delay),
	}
	s.addMessageLocked(m)
	if k != nil && fault != Unstored {
		k.to, k.text, k.msg, k.storedAt = req.To, req.Body, m, now
	}
	view := s.viewLocked(m, now)
	s.mu.Unlock()

	switch fault {
	case Unstored, Committed5xx:
		answer(http.StatusInternalServerError, sendyError("INTERNAL", "internal error"), false, m.ID)
	case DropAfterCommit:
		s.finish(rec, 0, false, fault, m.ID)
		dropConnection(w)
	default:
		answer(http.StatusAccepted, sendyView(view), false, m.ID)
	}
}

func (s *Server) sendyGet(w http.ResponseWriter, r *http.Request) {
	rec := s.record(r, Sendy, nil)
	if !s.sendyGate(w, rec, r) {
		return
	}
	s.mu.Lock()
	m, ok := s.byID[r.PathValue("id")]
	var v Message
	if ok && m.Provider == Sendy {
		v = s.viewLocked(m, s.nowLocked())
	} else {
		ok = false
	}
	s.mu.Unlock()
	if ok && s.readFails(Sendy, v.Key) {
		writeJSON(w, http.StatusServiceUnavailable, sendyError("SERVICE_UNAVAILABLE", "service unavailable; try again later"))
		s.finish(rec, http.StatusServiceUnavailable, false, LookupsDown, "")
		return
	}
	if !ok {
		writeJSON(w, http.StatusNotFound, sendyError("NOT_FOUND", "message not found"))
		s.finish(rec, http.StatusNotFound, false, "", "")
		return
	}
	writeJSON(w, http.StatusOK, sendyView(v))
	s.finish(rec, http.StatusOK, false, "", v.ID)
}
