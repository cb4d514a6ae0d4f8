package simulator

import (
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// birdRecord is a stored completed answer, replayed to an identical retry
// within the retention window.
type birdRecord struct {
	fingerprint [32]byte // method, path, query and raw body bytes
	status      int
	body        []byte
	messageID   string
	storedAt    time.Time
}

type birdLock struct {
	expires time.Time
}

var e164 = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)

type birdError struct {
	Code    string `json:"code"`
	Name    string `json:"name"`
	Message string `json:"message"`
}

type birdContact struct {
	IdentifierKey   string `json:"identifierKey"`
	IdentifierValue string `json:"identifierValue"`
}

type birdMessage struct {
	ID        string `json:"id"`
	Status    string `json:"status"`
	Reference string `json:"reference,omitempty"`
	Direction string `json:"direction"`
	CreatedAt string `json:"createdAt"`
	UpdatedAt string `json:"updatedAt"`
	ChannelID string `json:"channelId"`
	Receiver  struct {
		Contacts []birdContact `json:"contacts"`
	} `json:"receiver"`
	Body struct {
		Type string `json:"type"`
		Text struct {
			Text string `json:"text"`
		} `json:"text"`
	} `json:"body"`
}

func birdView(m Message) birdMessage {
	var b birdMessage
	b.ID, b.Status, b.Reference, b.Direction, b.ChannelID = m.ID, m.Status, m.Reference, "outgoing", m.Channel
	b.CreatedAt = m.CreatedAt.Format(time.RFC3339Nano)
	b.UpdatedAt = b.CreatedAt
	b.Receiver.Contacts = []birdContact{{IdentifierKey: "phonenumber", IdentifierValue: m.To}}
	b.Body.Type = "text"
	b.Body.Text.Text = m.Text
	return b
}

func (s *Server) birdAuthorized(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("Authorization") == "AccessKey "+s.cfg.BirdAccessKey {
		return true
	}
	writeJSON(w, http.StatusUnauthorized, birdError{Code: "E00401", Name: "Unauthorized", Message: "missing or invalid access key"})
	return false
}

// birdSend implements Bird's send with its idempotency contract.
func (s *Server) birdSend(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	rec := s.record(r, Bird, body)
	if !s.birdAuthorized(w, r) {
		s.finish(rec, http.StatusUnauthorized, false, "", "")
		return
	}
	ws, ch := r.PathValue("workspace"), r.PathValue("channel")
	key := rec.Key
	fault, delay := s.pickFault(Bird, key)

	// Faults that answer before execution.
	switch fault {
	case Unauthorized:
		writeJSON(w, http.StatusUnauthorized, birdError{Code: "E00401", Name: "Unauthorized", Message: "missing or invalid access key"})
		s.finish(rec, http.StatusUnauthorized, false, fault, "")
		return
	case Error5xx:
		writeJSON(w, http.StatusInternalServerError, birdError{Code: "E00500", Name: "InternalError", Message: "internal error"})
		s.finish(rec, http.StatusInternalServerError, false, fault, "")
		return
	case Unavailable:
		writeJSON(w, http.StatusServiceUnavailable, birdError{Code: "E01033", Name: "IdempotencyUnavailable", Message: "idempotency protection is unavailable; the request was not executed"})
		s.finish(rec, http.StatusServiceUnavailable, false, fault, "")
		return
	case RateLimit:
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(delay)))
		writeJSON(w, http.StatusTooManyRequests, birdError{Code: "E00429", Name: "TooManyRequests", Message: "rate limited"})
		s.finish(rec, http.StatusTooManyRequests, false, fault, "")
		return
	case InProgress:
		s.birdInProgress(w, rec, fault)
		return
	}

	fp := sha256.Sum256([]byte(r.Method + " " + r.URL.Path + "?" + r.URL.RawQuery + "\n" + string(body)))
	scope := ws + "/" + key

	s.mu.Lock()
	now := s.nowLocked()
	var lock *birdLock
	if key != "" {
		if stored := s.birdStore[scope]; stored != nil && now.Before(stored.storedAt.Add(s.cfg.BirdRetention)) {
			s.mu.Unlock()
			if stored.fingerprint != fp {
				writeJSON(w, http.StatusConflict, birdError{Code: "E01005", Name: "IdempotencyKeyReuse", Message: "the idempotency key was already used for a different request"})
				s.finish(rec, http.StatusConflict, false, fault, "")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Idempotency-Replay", "true")
			w.WriteHeader(stored.status)
			_, _ = w.Write(stored.body)
			s.finish(rec, stored.status, true, fault, stored.messageID)
			return
		}
		if l := s.birdLocks[scope]; l != nil && now.Before(l.expires) {
			s.mu.Unlock()
			s.birdInProgress(w, rec, fault)
			return
		}
		lock = &birdLock{expires: now.Add(s.cfg.LockExpiry)}
		if fault == LockExpiry {
			lock.expires = now // the lock is gone while the attempt still runs
		}
		s.birdLocks[scope] = lock
	}
	s.mu.Unlock()

	if fault == Hang || fault == LockExpiry {
		s.sleep(hangFor(delay))
	}

	status, answer, msgID := s.birdExecute(ws, ch, key, body, fault, delay)
	if key != "" {
		// Storing the answer completes the request: release the lock in the
		// same step, so a retry sees either the lock or the stored answer.
		s.mu.Lock()
		if fault != Unstored {
			s.birdStore[scope] = &birdRecord{fingerprint: fp, status: status, body: answer, messageID: msgID, storedAt: s.nowLocked()}
		}
		if s.birdLocks[scope] == lock {
			delete(s.birdLocks, scope)
		}
		s.mu.Unlock()
	}
	switch fault {
	case Unstored:
		writeJSON(w, http.StatusInternalServerError, birdError{Code: "E00500", Name: "InternalError", Message: "internal error"})
		s.finish(rec, http.StatusInternalServerError, false, fault, msgID)
	case DropAfterCommit:
		s.finish(rec, 0, false, fault, msgID)
		dropConnection(w)
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(answer)
		s.finish(rec, status, false, fault, msgID)
	}
}

func (s *Server) birdInProgress(w http.ResponseWriter, rec *Request, fault Kind) {
	writeJSON(w, http.StatusConflict, birdError{Code: "E01004", Name: "RequestInProgress", Message: "a request with this idempotency key is in progress"})
	s.finish(rec, http.StatusConflict, false, fault, "")
}

// birdExecute validates the body and creates the message; it returns the
// answer to send (and to store for replay).
func (s *Server) birdExecute(ws, ch, key string, body []byte, fault Kind, delay time.Duration) (int, []byte, string) {
	var req birdMessage // the request carries the same receiver, body and reference
	invalid := func(msg string) (int, []byte, string) {
		b, _ := json.Marshal(birdError{Code: "E00400", Name: "InvalidPayload", Message: msg})
		return http.StatusBadRequest, b, ""
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return invalid("the body is not valid JSON: " + err.Error())
	}
	if len(req.Receiver.Contacts) != 1 || req.Receiver.Contacts[0].IdentifierKey != "phonenumber" {
		return invalid("receiver.contacts must hold one contact with identifierKey phonenumber")
	}
	to := req.Receiver.Contacts[0].IdentifierValue
	if !e164.MatchString(to) {
		return invalid("receiver phone number is not in E.164 format")
	}
	if req.Body.Type != "text" || strings.TrimSpace(req.Body.Text.Text) == "" {
		return invalid("body must be of type text with a non-empty text")
	}
	s.mu.Lock()
	m := &Message{
		Provider: Bird, ID: s.newID(), Key: key, Workspace: ws, Channel: ch,
		To: to, Text: req.Body.Text.Text, Reference: req.Reference, CreatedAt: s.nowLocked(),
		final: s.finalStatusLocked(Bird, fault), deliverIn: deliverIn(fault, delay),
	}
	s.addMessageLocked(m)
	view := s.viewLocked(m, m.CreatedAt)
	s.mu.Unlock()
	b, _ := json.Marshal(birdView(view))
	return http.StatusAccepted, b, m.ID
}

func (s *Server) birdGet(w http.ResponseWriter, r *http.Request) {
	rec := s.record(r, Bird, nil)
	if !s.birdAuthorized(w, r) {
		s.finish(rec, http.StatusUnauthorized, false, "", "")
		return
	}
	s.mu.Lock()
	m, ok := s.byID[r.PathValue("id")]
	var v Message
	if ok {
		ok = m.Provider == Bird && m.Workspace == r.PathValue("workspace") && m.Channel == r.PathValue("channel")
		v = s.viewLocked(m, s.nowLocked())
	}
	s.mu.Unlock()
	if ok && s.readFails(Bird, v.Key) {
		s.birdReadDown(w, rec)
		return
	}
	if !ok {
		writeJSON(w, http.StatusNotFound, birdError{Code: "E00404", Name: "NotFound", Message: "message not found"})
		s.finish(rec, http.StatusNotFound, false, "", "")
		return
	}
	writeJSON(w, http.StatusOK, birdView(v))
	s.finish(rec, http.StatusOK, false, "", v.ID)
}

// birdList answers GET …/messages?direction=outgoing&startAt&endAt&limit&pageToken
// with {"results": [...], "nextPageToken": "..."}, oldest first.
func (s *Server) birdList(w http.ResponseWriter, r *http.Request) {
	rec := s.record(r, Bird, nil)
	if !s.birdAuthorized(w, r) {
		s.finish(rec, http.StatusUnauthorized, false, "", "")
		return
	}
	q := r.URL.Query()
	bad := func(msg string) {
		writeJSON(w, http.StatusBadRequest, birdError{Code: "E00400", Name: "InvalidQuery", Message: msg})
		s.finish(rec, http.StatusBadRequest, false, "", "")
	}
	if d := q.Get("direction"); d != "" && d != "outgoing" {
		bad("direction must be outgoing")
		return
	}
	parse := func(name string) (time.Time, bool) {
		v := q.Get(name)
		if v == "" {
			return time.Time{}, true
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		return t, err == nil
	}
	start, ok1 := parse("startAt")
	end, ok2 := parse("endAt")
	if !ok1 || !ok2 {
		bad("startAt and endAt must be RFC 3339 times")
		return
	}
	limit := 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			bad("limit must be from 1 to 100")
			return
		}
		limit = n
	}
	offset := 0
	if tok := q.Get("pageToken"); tok != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(tok, "p"))
		if err != nil || !strings.HasPrefix(tok, "p") || n < 0 {
			bad("pageToken is not one this server issued")
			return
		}
		offset = n
	}
	ws, ch := r.PathValue("workspace"), r.PathValue("channel")
	s.mu.Lock()
	now := s.nowLocked()
	var match []*Message
	for _, m := range s.messages {
		if m.Provider != Bird || m.Workspace != ws || m.Channel != ch {
			continue
		}
		if (!start.IsZero() && m.CreatedAt.Before(start)) || (!end.IsZero() && m.CreatedAt.After(end)) {
			continue
		}
		match = append(match, m)
	}
	sortedByCreated(match)
	page := struct {
		Results       []birdMessage `json:"results"`
		NextPageToken string        `json:"nextPageToken,omitempty"`
	}{Results: []birdMessage{}}
	var keys []string
	for i := offset; i < len(match) && i < offset+limit; i++ {
		page.Results = append(page.Results, birdView(s.viewLocked(match[i], now)))
		keys = append(keys, match[i].Key)
	}
	if offset+limit < len(match) {
		page.NextPageToken = "p" + strconv.Itoa(offset+limit)
	}
	s.mu.Unlock()
	if slices.ContainsFunc(keys, func(k string) bool { return s.readFails(Bird, k) }) {
		s.birdReadDown(w, rec)
		return
	}
	writeJSON(w, http.StatusOK, page)
	s.finish(rec, http.StatusOK, false, "", "")
}

// birdReadDown answers a read that a LookupsDown fault fails.
func (s *Server) birdReadDown(w http.ResponseWriter, rec *Request) {
	writeJSON(w, http.StatusServiceUnavailable, birdError{Code: "E00503", Name: "ServiceUnavailable", Message: "the service is unavailable; try again later"})
	s.finish(rec, http.StatusServiceUnavailable, false, LookupsDown, "")
}
