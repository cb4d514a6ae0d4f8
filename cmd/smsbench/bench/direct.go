package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/provider"
	"github.com/acme/smsorch/provider/bird"
	"github.com/acme/smsorch/starter"
)

// DirectConfig is the plain HTTP loop's: what a provider's documents
// suggest without an orchestrator.
type DirectConfig struct {
	SimURL      string
	Prefix      string
	N, Conc     int
	StatusPoll  time.Duration
	MaxAttempts int
}

// DirectResult is what the loop reports: per event when it began, when
// the provider accepted it and when its status was final, and what the
// process used.
type DirectResult struct {
	Started  []time.Time   `json:"started"`
	Accepted []time.Time   `json:"accepted"`
	Done     []time.Time   `json:"done"`
	CPU      time.Duration `json:"cpu"`
	PeakRSS  int64         `json:"peakRss"`
}

// RunDirect sends the events with the Bird client under the same key and
// the same bytes on every attempt, retrying what is safe to retry with
// backoff, then polls each message's status until it is final. It
// writes a DirectResult as JSON to out.
func RunDirect(ctx context.Context, cfg DirectConfig, out io.Writer) error {
	before, err := readUsage("self")
	if err != nil {
		return err
	}
	bc, err := bird.New(bird.Config{
		BaseURL: cfg.SimURL, AccessKey: logging.Secret(cmp.Or(os.Getenv("BIRD_ACCESS_KEY"), simulator.DefaultBirdAccessKey)),
		WorkspaceID: simulator.DevWorkspace, ChannelID: simulator.DevChannel,
	})
	if err != nil {
		return err
	}
	res := DirectResult{Started: make([]time.Time, cfg.N), Accepted: make([]time.Time, cfg.N), Done: make([]time.Time, cfg.N)}
	err = parallel(ctx, cfg.N, cfg.Conc, func(ctx context.Context, i int) error {
		e := event(cfg.Prefix, i, "bird")
		plan, err := starter.Validate(e, time.Now())
		if err != nil {
			return err
		}
		t0 := time.Now()
		req, err := bc.Plan(string(plan.Key), plan.Input.To, "", plan.Input.Text)
		if err != nil {
			return err
		}
		id, err := sendWithRetries(ctx, bc, req, cfg.MaxAttempts)
		if err != nil {
			return fmt.Errorf("event %s: %w", plan.Key, err)
		}
		accepted := time.Now()
		for final := false; !final; {
			select {
			case <-ctx.Done():
				return fmt.Errorf("event %s: no final status before the end: %w", plan.Key, ctx.Err())
			case <-time.After(cfg.StatusPoll):
			}
			m, err := bc.Get(ctx, id)
			final = err == nil && m.Status.Final()
		}
		res.Started[i], res.Accepted[i], res.Done[i] = t0, accepted, time.Now() // i is this goroutine's alone
		return nil
	})
	if err != nil {
		return err
	}
	after, err := readUsage("self")
	if err != nil {
		return err
	}
	res.CPU, res.PeakRSS = after.CPU-before.CPU, after.PeakRSS
	return json.NewEncoder(out).Encode(res)
}

// sendWithRetries makes attempts of req until one is accepted or
// replayed, backing off on what did not certainly fail.
func sendWithRetries(ctx context.Context, c provider.Client, req provider.Request, maxAttempts int) (string, error) {
	backoff := time.Second
	for attempt := 1; ; attempt++ {
		r := c.Send(ctx, req)
		switch {
		case r.Outcome.Sent():
			return r.MessageID, nil
		case r.Outcome == provider.Rejected:
			return "", fmt.Errorf("rejected: %s", r.Reason)
		case attempt >= maxAttempts:
			return "", fmt.Errorf("no acceptance after %d attempts: %s", attempt, r.Reason)
		}
		wait := max(backoff, r.RetryAfter)
		select {
		case <-ctx.Done():
			return "", errors.Join(ctx.Err(), errors.New(r.Reason))
		case <-time.After(wait):
		}
		backoff = min(2*backoff, time.Minute)
	}
}
