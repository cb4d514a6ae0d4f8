package codec

import (
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
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

// ApplyRefusingUnsealed is Apply for a worker outside dev mode: besides
// sealing and opening, every payload that arrives unsealed is marked
// (EncodingUnsealed), and the client's data converter refuses to decode
// a marked payload with ErrUnsealed. A run whose input is refused fails
// before it does anything; a decision signal is refused in the run's
// timeline (it reads signals as raw values, which pass). A nil ring
// leaves opts alone.
func (k *Keyring) ApplyRefusingUnsealed(opts *client.Options) error {
	if k == nil {
		return nil
	}
	if err := k.apply(opts, refusing{k}); err != nil {
		return err
	}
	dc := opts.DataConverter
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	opts.DataConverter = refusingConverter{dc}
	return nil
}

// refusing opens sealed payloads and marks the others, and those that
// claim to be sealed but do not open (another key, altered bytes): one
// such payload must not fail the whole answer that carries it, which
// would redeliver a run's workflow task for ever.
type refusing struct{ *Keyring }

func (r refusing) Decode(ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(ps))
	for i, p := range ps {
		if string(p.GetMetadata()[converter.MetadataEncoding]) == Encoding {
			opened, err := r.Keyring.Decode([]*commonpb.Payload{p})
			if err == nil {
				out[i] = opened[0]
				continue
			}
		}
		out[i] = unsealed.Mark(p)
	}
	return out, nil
}

// Unsealed reports whether p was marked as having arrived unsealed.
func Unsealed(p *commonpb.Payload) bool { return unsealed.Is(p) }

// refusingConverter refuses to decode a marked payload into anything but
// a converter.RawValue.
type refusingConverter struct{ converter.DataConverter }

func (c refusingConverter) FromPayload(p *commonpb.Payload, v any) error {
	if _, raw := v.(*converter.RawValue); Unsealed(p) && !raw {
		return ErrUnsealed
	}
	return c.DataConverter.FromPayload(p, v)
}

func (c refusingConverter) FromPayloads(ps *commonpb.Payloads, vs ...any) error {
	for i, p := range ps.GetPayloads() {
		if i >= len(vs) {
			break
		}
		if _, raw := vs[i].(*converter.RawValue); Unsealed(p) && !raw {
			return fmt.Errorf("argument %d: %w", i+1, ErrUnsealed)
		}
	}
	return c.DataConverter.FromPayloads(ps, vs...)
}
