package codec

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/acme/smsorch/codec/unsealed"
)

// EncodingUnsealed replaces, in a process that refuses unsealed
// payloads, the encoding of a payload that reached it in plain text: no
// converter reads it, so a decoder that tries says why.
const EncodingUnsealed = unsealed.Encoding

// MetadataPlainEncoding keeps the refused payload's own encoding.
const MetadataPlainEncoding = unsealed.MetadataPlainEncoding

// ErrUnsealed is a payload that reached a worker outside dev mode in
// plain text: it did not come through smsorch or the codec server, so
// nobody who holds the keys sent it.
var ErrUnsealed = errors.New("codec: refused a payload that reached Temporal unsealed: outside dev mode the worker acts only on payloads sealed with one of its keys " +
	"(" + EnvKeys + "), so a run or a decision sent around smsorch (a plain `temporal workflow start`, say) sends nothing. " +
	"Start events through the starter, smsctl or the intake, and signal with smsctl, or with the temporal CLI or web UI given the codec server; " +
	"a run started before encryption was turned on finishes under a worker started with --accept-unsealed")

// ErrUnopened is a payload sealed under a key this worker lacks, or
// that does not open under the key it names: sealed by someone who holds
// the keys, so the work it carries is not refused but left for a worker
// that can open it.
var ErrUnopened = errors.New("codec: this worker cannot open a payload sealed for smsorch")

// ApplyRefusingUnsealed is Apply for a worker outside dev mode: besides
// sealing and opening, every payload that arrives unsealed is marked
// (EncodingUnsealed), and the client's data converter refuses to decode
// a marked payload with ErrUnsealed. A run whose input is refused fails
// before it does anything; a decision signal is refused in the run's
// timeline (it reads signals as raw values, which pass).
//
// A payload sealed under a key the ring lacks (a worker given the wrong
// keys, or not yet the new one) is marked too, but never fails a run:
// decoding it as a run's input panics in the workflow, which fails the
// workflow task, so Temporal retries it, on this worker or one that
// holds the key; as an activity's input it fails the attempt, which is
// retried. Both errors name the key (ErrUnopened), and Unopened reports
// it for the worker's readiness. A nil ring leaves opts alone.
func (k *Keyring) ApplyRefusingUnsealed(opts *client.Options) error {
	if k == nil {
		return nil
	}
	return k.applyOpening(opts, true)
}

// applyOpening is Apply and ApplyRefusingUnsealed: the client opens what
// it can, and a payload it cannot open (or, refusing, one that arrived
// in plain) is marked, for the converter to refuse when it is read.
func (k *Keyring) applyOpening(opts *client.Options, refuseUnsealed bool) error {
	if err := k.apply(opts, refusing{k, refuseUnsealed}); err != nil {
		return err
	}
	dc := opts.DataConverter
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	opts.DataConverter = refusingConverter{DataConverter: dc, k: k}
	return nil
}

// refusing opens sealed payloads and marks those that claim to be sealed
// but do not open (another key, altered bytes), and, refuseUnsealed,
// those that arrived in plain: one such payload must not fail the whole
// answer that carries it, which would redeliver a run's workflow task
// for ever, its signals and state query included, or leave a client
// unable to read a history that another worker's key wrote into (the
// failure of a workflow task, sealed by a worker with the wrong keys).
// Those that do not open say why (unsealed.Unopened).
type refusing struct {
	*Keyring
	refuseUnsealed bool
}

func (r refusing) Decode(ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(ps))
	for i, p := range ps {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != Encoding {
			out[i] = p
			if r.refuseUnsealed {
				out[i] = unsealed.Mark(p)
			}
			continue
		}
		opened, err := r.Keyring.Decode([]*commonpb.Payload{p})
		if err == nil {
			out[i] = opened[0]
			continue
		}
		id := string(p.GetMetadata()[MetadataKeyID])
		why := fmt.Sprintf("sealed with key %q, which does not open under this worker's key of that name (another key made under the same id, or altered bytes)", id)
		if errors.Is(err, ErrUnknownKey) {
			why = fmt.Sprintf("sealed with key %q, which this worker's ring (%s) lacks", id, strings.Join(r.ids, ", "))
		}
		out[i] = unsealed.MarkUnopened(p, why)
	}
	return out, nil
}

// Unsealed reports whether p was marked as having arrived unsealed.
func Unsealed(p *commonpb.Payload) bool { return unsealed.Is(p) }

// Unopened is the last time this ring was given work (a run's workflow
// task, an activity) carrying a payload it could not open
// (ErrUnopened), and why; a zero time if never. A client's read of such
// a payload (smsctl, the starter, an update's arguments) is not work,
// and is not noted.
func (k *Keyring) Unopened() (why string, at time.Time) {
	k.unopened.Lock()
	defer k.unopened.Unlock()
	return k.unopened.why, k.unopened.at
}

// noteUnopened records work this ring could not open, for Unopened.
func (k *Keyring) noteUnopened(why string) {
	k.unopened.Lock()
	k.unopened.why, k.unopened.at = why, time.Now()
	k.unopened.Unlock()
}

// Where a refusingConverter decodes: a client's call, a run's workflow
// task, or an activity.
const (
	inClient = iota
	inWorkflow
	inActivity
)

// refusingConverter refuses to decode a marked payload into anything but
// a converter.RawValue; in a workflow, one that did not open panics
// instead (ApplyRefusingUnsealed).
type refusingConverter struct {
	converter.DataConverter
	k     *Keyring
	where int
}

// refuse is the error of decoding p, marked, into a value other than a
// RawValue, or nil. In a workflow, a payload that did not open panics:
// the SDK fails the workflow task, not the run.
func (c refusingConverter) refuse(p *commonpb.Payload, v any) error {
	if _, raw := v.(*converter.RawValue); raw || !Unsealed(p) {
		return nil
	}
	why := unsealed.Unopened(p)
	if why == "" {
		return ErrUnsealed
	}
	if c.where == inClient {
		return fmt.Errorf("%w: a payload %s: give this program every key still in use, newest first, in %s", ErrUnopened, why, EnvKeys)
	}
	c.k.noteUnopened(why)
	err := fmt.Errorf("%w: a payload %s. The run waits, retried by Temporal, for a worker that holds the key: give every worker every key still in use, newest first, in %s", ErrUnopened, why, EnvKeys)
	if c.where == inWorkflow {
		panic(err)
	}
	return err
}

func (c refusingConverter) FromPayload(p *commonpb.Payload, v any) error {
	if err := c.refuse(p, v); err != nil {
		return err
	}
	return c.DataConverter.FromPayload(p, v)
}

func (c refusingConverter) FromPayloads(ps *commonpb.Payloads, vs ...any) error {
	for i, p := range ps.GetPayloads() {
		if i >= len(vs) {
			break
		}
		if err := c.refuse(p, vs[i]); err != nil {
			return fmt.Errorf("argument %d: %w", i+1, err)
		}
	}
	return c.DataConverter.FromPayloads(ps, vs...)
}

// WithWorkflowContext is the converter the SDK decodes a workflow's
// input and results with: one that panics on a payload that did not
// open.
func (c refusingConverter) WithWorkflowContext(ctx converter.WorkflowContext) converter.DataConverter {
	if inner, ok := c.DataConverter.(converter.ContextAware); ok {
		c.DataConverter = inner.WithWorkflowContext(ctx)
	}
	c.where = inWorkflow
	return c
}

// WithContext is the converter of an activity, or of a client call: one
// that returns the error.
func (c refusingConverter) WithContext(ctx context.Context) converter.DataConverter {
	if inner, ok := c.DataConverter.(converter.ContextAware); ok {
		c.DataConverter = inner.WithContext(ctx)
	}
	c.where = inClient
	if activity.IsActivity(ctx) {
		c.where = inActivity
	}
	return c
}
