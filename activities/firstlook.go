package activities

// The first status lookup, made by the Send that got the message
// accepted, and the settle of a message it finds delivered.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/acme/smsorch/internal/tracing"
	"github.com/acme/smsorch/provider"
)

// FirstLook asks a Send to look its accepted message up once, After the
// acceptance, and to settle the event when that look (or the answer
// itself) finds the message delivered. The run then needs no workflow
// task, upsert or activity of its own between the acceptance and its
// end: a delivered run is its start, its claim, one Send and its close.
//
// Nothing of the send depends on it: the look is made after the
// acceptance is recorded in the ledger, a look that fails or has no time
// is left out, and the run then tracks delivery as it would have.
type FirstLook struct {
	// After is the wait from the acceptance to the look: the tracking
	// schedule's first interval (Policy.StatusPollInitial).
	After time.Duration `json:"after"`
	// SendWithin is the attempt's start-to-close without the look: the
	// send keeps it as its own deadline, and the look has the rest
	// (FirstLookTime).
	SendWithin time.Duration `json:"sendWithin,omitempty"`
	// Timeout bounds the look's request: the provider's attempt timeout,
	// at most FirstLookTimeout (0: FirstLookTimeout).
	Timeout time.Duration `json:"timeout,omitempty"`
	// Settle, when set, is the settle the run would make were the
	// message delivered: its Key, KnownKeys, CheckKeys, MessageIDs,
	// Findings and LedgerID. The activity fills in the outcome, the
	// reason and the message, and settles only when the attempt that
	// got the message accepted is certain (no earlier attempt of the key
	// ended without an answer, which the run must look behind first).
	Settle *SettleInput `json:"settle,omitempty"`
}

// Delivered is the outcome a run settles with when its message was
// delivered (contract.Delivered).
const Delivered = "Delivered"

// DeliveredReason is the reason a run gives for a delivered message.
func DeliveredReason(id string) string { return fmt.Sprintf("delivered as message %s", id) }

// FirstLookTimeout bounds the look a Send makes after the acceptance: a
// status lookup is a small GET, and a slow one is left to the run.
const FirstLookTimeout = 5 * time.Second

// timeout is the bound of the look's request.
func (l *FirstLook) timeout() time.Duration {
	if l.Timeout > 0 && l.Timeout < FirstLookTimeout {
		return l.Timeout
	}
	return FirstLookTimeout
}

// FirstLookSettleTime is what a FirstLook keeps after its look for the
// settle, and of it firstLookCompletion for the activity to complete:
// an accepted answer must reach the run before the attempt's deadline.
const (
	FirstLookSettleTime = 5 * time.Second
	firstLookCompletion = time.Second
)

// FirstLookTime is the time a FirstLook adds to a Send's attempt: the
// workflow adds it to the activity's start-to-close timeout.
func FirstLookTime(l *FirstLook) time.Duration {
	if l == nil {
		return 0
	}
	return l.After + l.timeout() + FirstLookSettleTime
}

// firstLook makes the look and the settle FirstLook asks for, into out.
// It never changes the send's result: whatever fails here only leaves
// the look or the settle out.
func (a *Activities) firstLook(ctx context.Context, in SendInput, out *SendOutput) {
	l := in.Look
	id := out.Result.MessageID
	if l == nil || id == "" {
		return
	}
	status := out.Result.Status
	if !status.Final() {
		m, ok := a.lookOnce(ctx, in, l, id)
		if !ok {
			return
		}
		out.Looked, status = m.Status, m.Status
	}
	if status != provider.StatusDelivered || l.Settle == nil || out.Uncertain {
		return
	}
	s := *l.Settle
	s.Key, s.Outcome, s.Reason, s.MessageID = in.EventKey, Delivered, DeliveredReason(id), id
	if !slices.Contains(s.MessageIDs, id) {
		s.MessageIDs = append(slices.Clone(s.MessageIDs), id)
	}
	s.CheckKeys = true
	deadline, set := ctx.Deadline()
	if set && time.Until(deadline) < FirstLookSettleTime {
		return // the run settles itself: the answer must reach it in time
	}
	sctx, cancel := context.WithCancel(ctx)
	if set {
		sctx, cancel = context.WithDeadline(ctx, deadline.Add(-firstLookCompletion))
	}
	defer cancel()
	settled, err := a.Settle(sctx, s)
	if err != nil || len(settled.UnknownKeys) > 0 {
		// The run settles itself, and searches the keys it did not know.
		a.log().Info("the send left the settle of a delivered message to the run", zap.String("key", in.EventKey), zap.Error(err),
			zap.Int("unknownKeys", len(settled.UnknownKeys)))
		return
	}
	out.Settled = &settled
}

// lookOnce waits l.After and looks message id up, if the attempt's
// deadline leaves the time for both and the settle; ok is false when it
// did not look or the look failed.
func (a *Activities) lookOnce(ctx context.Context, in SendInput, l *FirstLook, id string) (provider.Message, bool) {
	if deadline, set := ctx.Deadline(); set && time.Until(deadline) < FirstLookTime(l) {
		return provider.Message{}, false
	}
	c, err := a.client(string(in.Request.Provider))
	if err != nil {
		return provider.Message{}, false
	}
	if err := a.sleep(ctx, l.After); err != nil {
		return provider.Message{}, false
	}
	lctx, cancel := context.WithTimeout(ctx, l.timeout())
	defer cancel()
	m, err := c.Get(lctx, id)
	if err != nil {
		a.log().Info("the send's first status lookup failed; the run looks again on its schedule", zap.String("key", in.EventKey), zap.String("message", id), zap.Error(err))
		return provider.Message{}, false
	}
	tracing.Annotate(ctx, tracing.Status.String(string(m.Status)))
	return lean(m), true
}

// sleep waits d, or until ctx ends or the worker begins to stop: an
// accepted answer goes to the run at once rather than wait out a look.
func (a *Activities) sleep(ctx context.Context, d time.Duration) error {
	if a.Sleep != nil {
		return a.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-activity.GetWorkerStopChannel(ctx):
		return errors.New("the worker is stopping")
	}
}
