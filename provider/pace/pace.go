// Package pace holds a provider's requests to its published limit for a
// whole fleet of workers, by construction: before each request a worker
// takes a slot in the ledger the fleet shares, and a request leaves only
// within LeaveWithin of asking for its slot: checked when the request
// has its connection, before a byte of it is written (a slow dial or
// handshake, or net/http sending a request again on a new connection,
// takes a fresh slot or sends nothing).
//
// Why that bounds what the provider sees: a request that reaches the
// provider at time a asked for its slot at most LeaveWithin + transit
// before a, and its slot's time lies between the two. The requests that
// reach the provider in any Window therefore hold slots within a window
// of Window + Margin, as long as transit (the request's own way to the
// provider, after it left) stays within Margin - LeaveWithin; and the
// ledger records no more than the limit in any such window, on its
// clock, which must not step forward (a step makes the slots before it
// look older than they are). The task
// queue's rate, which the server enforces, only spreads the requests so
// that a slot is seldom waited for; it is not what holds the limit.
package pace

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/acme/smsorch/provider"
)

const (
	// Window is the window a provider's limit counts in: a minute.
	Window = time.Minute
	// LeaveWithin is how long after asking for its slot a request may
	// still leave; a slot granted later is left unused.
	LeaveWithin = time.Second
	// Margin is what the slots' window adds to Window: LeaveWithin and a
	// second for the request's way to the provider.
	Margin = 2 * time.Second
	// lateGrants is how many slots in a row a take may receive too late
	// to use (a ledger slower than LeaveWithin) before it gives up.
	lateGrants = 3
)

// Slots is where the fleet's slots are taken: the ledger.
type Slots interface {
	TakeSlot(ctx context.Context, name string, limit int, window time.Duration) (wait time.Duration, err error)
}

// Fleet paces one provider's requests for the fleet that shares slots.
type Fleet struct {
	slots     Slots
	name      provider.Name
	perMinute int
	sleep     func(ctx context.Context, d time.Duration) error
	now       func() time.Time
}

var _ provider.Pacer = (*Fleet)(nil)

// New paces provider p to perMinute requests in any minute at the
// provider, for every worker whose pacer takes its slots from slots.
func New(slots Slots, p provider.Name, perMinute int) (*Fleet, error) {
	if slots == nil || perMinute < 1 {
		return nil, fmt.Errorf("pace: %s needs a ledger and a limit of at least one request a minute (got %d)", p, perMinute)
	}
	return &Fleet{slots: slots, name: p, perMinute: perMinute, sleep: sleep, now: time.Now}, nil
}

// ForLimit is provider p's pacer at perMinute requests a minute for the
// fleet that shares slots, and nil for 0 (no limit).
func ForLimit(slots Slots, p provider.Name, perMinute int) (provider.Pacer, error) {
	if perMinute == 0 {
		return nil, nil
	}
	f, err := New(slots, p, perMinute)
	if err != nil {
		return nil, err // not a nil *Fleet in a non-nil Pacer
	}
	return f, nil
}

// fresh reports whether a request may still leave on a slot asked for
// at asked: within LeaveWithin.
func (f *Fleet) fresh(asked time.Time) bool { return f.now().Sub(asked) <= LeaveWithin }

// MostInAnyWindow is the most of the times at that fall into one window
// of the given length: what a Fleet holds to its limit at the provider
// for Window, as the tests count the requests that reached it.
func MostInAnyWindow(at []time.Time, window time.Duration) int {
	sorted := slices.SortedFunc(slices.Values(at), func(a, b time.Time) int { return a.Compare(b) })
	most := 0
	for i := range sorted {
		j := sort.Search(len(sorted), func(j int) bool { return !sorted[j].Before(sorted[i].Add(window)) })
		most = max(most, j-i)
	}
	return most
}

// Take implements provider.Pacer: it returns once a slot is taken that
// the request can use at once, waiting for one while ctx's deadline
// still leaves reserve after the wait and the take that follows it.
func (f *Fleet) Take(ctx context.Context, reserve time.Duration) (provider.Slot, error) {
	late := 0
	for {
		asked, wait, err := f.take(ctx)
		if err != nil {
			return nil, err
		}
		if wait == 0 {
			if !f.fresh(asked) {
				// Granted too late to leave within LeaveWithin: the slot's
				// time is too far behind, and it stays unused.
				if late++; late == lateGrants {
					return nil, &provider.NotSentError{Reason: fmt.Sprintf("the ledger granted %d request slots at %s each more than %s after they were asked for; it is too slow to pace requests", lateGrants, f.name, LeaveWithin), RetryAfter: time.Second}
				}
				continue
			}
			if deadline, ok := ctx.Deadline(); ok && deadline.Sub(f.now()) < reserve {
				// The slot came, but what is left would cut the request
				// off before its answer: better not sent than unknown.
				return nil, &provider.NotSentError{Reason: fmt.Sprintf("a request slot at %s came with less than the request's %s left before the attempt's deadline", f.name, reserve), RetryAfter: time.Second}
			}
			return &slot{f: f, asked: asked}, nil
		}
		if deadline, ok := ctx.Deadline(); ok && deadline.Sub(f.now()) < wait+LeaveWithin+reserve {
			return nil, &provider.NotSentError{Reason: fmt.Sprintf("%s's limit of %d requests a minute is used up for the next %s, and the attempt's deadline comes first", f.name, f.perMinute, wait.Round(time.Millisecond)), RetryAfter: wait}
		}
		if err := f.sleep(ctx, wait); err != nil {
			return nil, &provider.NotSentError{Reason: fmt.Sprintf("waiting for a request slot at %s: %v", f.name, err)}
		}
	}
}

// take asks the ledger for a slot once: when it asked, and how long to
// wait when none was free.
func (f *Fleet) take(ctx context.Context) (asked time.Time, wait time.Duration, err error) {
	asked = f.now()
	wait, err = f.slots.TakeSlot(ctx, string(f.name), f.perMinute, Window+Margin)
	if err != nil {
		return asked, 0, &provider.NotSentError{Reason: fmt.Sprintf("the fleet's request slots at %s could not be read (%v)", f.name, err), RetryAfter: time.Second}
	}
	return asked, wait, nil
}

// slot is one request's slot, and when it was asked for.
type slot struct {
	f     *Fleet
	asked time.Time
	used  bool
}

// Use implements provider.Slot: the first connection may carry the
// request while the slot is fresh (within LeaveWithin of asking); a
// connection that came later, or another connection for the same
// request, needs a slot of its own, free now, or nothing leaves.
func (s *slot) Use(ctx context.Context) error {
	if !s.used && s.f.fresh(s.asked) {
		s.used = true
		return nil
	}
	asked, wait, err := s.f.take(ctx)
	switch {
	case err != nil:
		return err
	case wait > 0:
		return &provider.NotSentError{Reason: fmt.Sprintf("the connection to %s came too late for the request's slot, and the limit of %d requests a minute has none free for %s", s.f.name, s.f.perMinute, wait.Round(time.Millisecond)), RetryAfter: wait}
	case !s.f.fresh(asked):
		return &provider.NotSentError{Reason: fmt.Sprintf("the ledger granted a request slot at %s more than %s after it was asked for", s.f.name, LeaveWithin), RetryAfter: time.Second}
	}
	s.asked, s.used = asked, true
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
