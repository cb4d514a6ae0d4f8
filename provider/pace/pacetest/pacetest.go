// Package pacetest holds pacers for tests of what a client does with a
// slot: one whose slots answer from a script, and one that has none.
package pacetest

import (
	"context"
	"sync"
	"time"

	"github.com/acme/smsorch/provider"
)

// Script gives a slot to every Take; its slots' Use answers from Uses,
// one entry per call in order (true: the request may leave; false, or
// past the end: held back, as a slot too old by its connection is).
type Script struct {
	Uses []bool
	mu   sync.Mutex
	n    int
}

// Take implements provider.Pacer.
func (p *Script) Take(context.Context, time.Duration) (provider.Slot, error) { return p, nil }

// Use implements provider.Slot.
func (p *Script) Use(context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ok := p.n < len(p.Uses) && p.Uses[p.n]
	p.n++
	if ok {
		return nil
	}
	return &provider.NotSentError{Reason: "held by the test's script", RetryAfter: time.Second}
}

// Refuse has no slot to give: every Take fails with its reason and wait.
type Refuse struct {
	Reason     string
	RetryAfter time.Duration
}

// Take implements provider.Pacer.
func (r Refuse) Take(context.Context, time.Duration) (provider.Slot, error) {
	return nil, &provider.NotSentError{Reason: r.Reason, RetryAfter: r.RetryAfter}
}
