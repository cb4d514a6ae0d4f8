package simulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// adminRoutes serves the /_sim/ admin API:
//
//	GET    /_sim/messages?provider=&key=   every message created
//	GET    /_sim/requests?provider=&key=   every request received
//	GET    /_sim/clock                     the simulator clock
//	POST   /_sim/clock   {"advance":"3h"}  move it
//	GET    /_sim/faults                    the installed fault rules
//	POST   /_sim/faults  {"kind":…}        add one rule (or a JSON array of rules)
//	DELETE /_sim/faults                    remove every rule
//	POST   /_sim/reset                     forget everything
func (s *Server) adminRoutes(mux *http.ServeMux) {
	filter := func(r *http.Request) Filter {
		return Filter{Provider: r.URL.Query().Get("provider"), Key: r.URL.Query().Get("key")}
	}
	mux.HandleFunc("GET /_sim/messages", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"messages": nonNil(s.Messages(filter(r)))})
	})
	mux.HandleFunc("GET /_sim/requests", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"requests": nonNil(s.Requests(filter(r)))})
	})
	mux.HandleFunc("GET /_sim/clock", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"now": s.Now()})
	})
	mux.HandleFunc("POST /_sim/clock", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Advance Duration `json:"advance"`
		}
		if err := decode(r, &req); err != nil || req.Advance == 0 {
			adminError(w, http.StatusBadRequest, `send {"advance":"3h"} to move the clock forward by a Go duration`, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"now": s.Advance(time.Duration(req.Advance))})
	})
	mux.HandleFunc("GET /_sim/faults", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"faults": nonNil(s.Faults())})
	})
	mux.HandleFunc("POST /_sim/faults", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			adminError(w, http.StatusBadRequest, "could not read the body", err)
			return
		}
		var many []Fault
		if err := json.Unmarshal(b, &many); err != nil {
			var one Fault
			if err := json.Unmarshal(b, &one); err != nil {
				adminError(w, http.StatusBadRequest, `send a fault like {"kind":"unavailable","provider":"bird","count":1}`, err)
				return
			}
			many = []Fault{one}
		}
		for _, f := range many {
			if err := f.Validate(); err != nil {
				adminError(w, http.StatusBadRequest, "fault refused", err)
				return
			}
		}
		for _, f := range many {
			_ = s.AddFault(f) // validated above
		}
		writeJSON(w, http.StatusOK, map[string]any{"faults": nonNil(s.Faults())})
	})
	mux.HandleFunc("DELETE /_sim/faults", func(w http.ResponseWriter, r *http.Request) {
		s.ClearFaults()
		writeJSON(w, http.StatusOK, map[string]any{"faults": []Fault{}})
	})
	mux.HandleFunc("POST /_sim/reset", func(w http.ResponseWriter, r *http.Request) {
		s.Reset()
		writeJSON(w, http.StatusOK, map[string]any{"reset": true, "now": s.Now()})
	})
}

func nonNil[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}

func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func adminError(w http.ResponseWriter, status int, msg string, err error) {
	if err != nil {
		msg = fmt.Sprintf("%s: %v", msg, err)
	}
	writeJSON(w, status, map[string]string{"error": msg})
}

// Listening is a simulator serving on a TCP address.
type Listening struct {
	*Server
	// URL is the base URL both providers' clients use, e.g. http://127.0.0.1:8299.
	URL string
	srv *http.Server
	l   net.Listener
}

// Listen starts serving on addr (port 0 picks a free one) in the background.
func (s *Server) Listen(addr string) (*Listening, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("the provider simulator cannot listen on %s: %w (stop what uses it or choose another address)", addr, err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return &Listening{Server: s, URL: "http://" + l.Addr().String(), srv: srv, l: l}, nil
}

// Close stops serving; requests still running (a Hang fault) are cut off.
func (l *Listening) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := l.srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return l.srv.Close()
}
