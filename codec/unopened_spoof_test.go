package codec

import (
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/acme/smsorch/codec/unsealed"
)

// A payload sent around smsorch in plain must be refused (ErrUnsealed:
// the run fails before it does anything), whatever metadata its sender
// put on it. Adding the "smsorch-unopened" metadata key to a plain
// payload makes the worker treat it as sealed under a missing key: the
// run's workflow task panics forever, readiness fails for every worker
// that takes it, and the sender's text becomes the reason logged.
func TestAPlainPayloadCannotClaimToBeUnopened(t *testing.T) {
	t.Parallel()
	k, _ := ring(t, "2026-12")
	plain, err := converter.GetDefaultDataConverter().ToPayload(map[string]string{"to": "+31612345678"})
	require.NoError(t, err)
	plain.Metadata[unsealed.MetadataUnopened] = []byte("anything its sender likes")

	out, err := refusing{k, true}.Decode([]*commonpb.Payload{plain})
	require.NoError(t, err)
	dc := refusingConverter{DataConverter: converter.GetDefaultDataConverter(), k: k}.WithWorkflowContext(nil)
	var v map[string]string
	require.NotPanics(t, func() { err = dc.FromPayload(out[0], &v) }, "a plain payload is refused, not retried")
	require.ErrorIs(t, err, ErrUnsealed)
	why, at := k.Unopened()
	require.True(t, at.IsZero(), "readiness is not failed by a plain payload (recorded: %q)", why)
}
