package codec

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// A payload that says it is sealed but does not open (a plain
// `temporal workflow signal --input-meta encoding=binary/encrypted
// --input-meta encryption-key-id=x`, or one sealed under a key this
// worker does not have yet) must be refused like any unsealed payload.
// An error here would fail the whole PollWorkflowTaskQueue response that
// carries it: the workflow task would be redelivered for ever, the run
// stuck, its state query failing, and nothing written in its timeline.
func TestAPayloadThatDoesNotOpenIsRefusedNotFatal(t *testing.T) {
	t.Parallel()
	spec, err := NewKey("k1")
	require.NoError(t, err)
	k, err := ParseKeys(spec)
	require.NoError(t, err)
	plain, err := converter.GetDefaultDataConverter().ToPayload(map[string]string{"reason": "r", "by": "b"})
	require.NoError(t, err)
	sealed, err := k.Encode([]*commonpb.Payload{plain})
	require.NoError(t, err)
	unknownKey := &commonpb.Payload{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte(Encoding), MetadataKeyID: []byte("nobody")},
		Data:     []byte(`{"reason":"r","by":"b","force":true}`),
	}
	tampered := &commonpb.Payload{
		Metadata: map[string][]byte{converter.MetadataEncoding: []byte(Encoding), MetadataKeyID: []byte("k1")},
		Data:     make([]byte, 48),
	}
	out, err := refusing{k, true}.Decode([]*commonpb.Payload{sealed[0], unknownKey, tampered})
	require.NoError(t, err, "one bad payload must not fail the whole response (the run's every workflow task)")
	require.False(t, Unsealed(out[0]), "the sealed one opens")
	require.True(t, Unsealed(out[1]), "an unknown key id is refused (marked), so a decision is refused in the timeline")
	require.True(t, Unsealed(out[2]), "a payload that does not open is refused (marked)")
}

// A payload sealed for smsorch that this worker cannot open is work for
// a worker that can: decoding it as a run's input panics (the SDK then
// fails the workflow task, which Temporal retries, instead of the run),
// as an activity's it is an error naming the key, and the ring keeps it
// for readiness. A payload that arrived in plain is refused as before.
func TestAPayloadSealedUnderAnotherKeyWaitsForAWorkerThatHoldsIt(t *testing.T) {
	t.Parallel()
	right, _ := ring(t, "2026-12")
	wrong, _ := ring(t, "2026-11")
	sameName, _ := ring(t, "2026-12")
	plain, err := converter.GetDefaultDataConverter().ToPayload(map[string]string{"to": "+31612345678"})
	require.NoError(t, err)
	sealed, err := right.Encode([]*commonpb.Payload{plain})
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		ring *Keyring
		why  string
	}{
		{"a key the ring lacks", wrong, `sealed with key "2026-12", which this worker's ring (2026-11) lacks`},
		{"another key under the same id", sameName, `sealed with key "2026-12", which does not open under this worker's key of that name`},
	} {
		out, err := refusing{tc.ring, true}.Decode(sealed)
		require.NoError(t, err, tc.name)
		require.True(t, Unsealed(out[0]), tc.name)
		_, at := tc.ring.Unopened()
		require.True(t, at.IsZero(), "%s: marking alone is no failure (a signal is refused in the timeline)", tc.name)

		dc := refusingConverter{DataConverter: converter.GetDefaultDataConverter(), k: tc.ring}
		var v map[string]string
		err = dc.WithContext(context.Background()).FromPayloads(&commonpb.Payloads{Payloads: out}, &v)
		require.ErrorIs(t, err, ErrUnopened, tc.name)
		require.ErrorContains(t, err, tc.why, tc.name)
		require.ErrorContains(t, err, "give this program every key still in use", "%s: a client is told what to do", tc.name)
		_, at = tc.ring.Unopened()
		require.True(t, at.IsZero(), "%s: a client's read is not the worker's work: readiness stays", tc.name)

		inActivity := refusingConverter{DataConverter: converter.GetDefaultDataConverter(), k: tc.ring, where: inActivity}
		err = inActivity.FromPayloads(&commonpb.Payloads{Payloads: out}, &v)
		require.ErrorIs(t, err, ErrUnopened, tc.name)
		require.ErrorContains(t, err, "The run waits, retried by Temporal", "%s: an activity's attempt fails, to be retried", tc.name)
		require.ErrorContains(t, err, EnvKeys, "%s: says what to do", tc.name)
		why, at := tc.ring.Unopened()
		require.Contains(t, why, tc.why, tc.name)
		require.WithinDuration(t, time.Now(), at, time.Minute, tc.name)

		inWorkflow := dc.WithWorkflowContext(nil)
		require.PanicsWithError(t, strings.TrimPrefix(err.Error(), "argument 1: "), func() { _ = inWorkflow.FromPayloads(&commonpb.Payloads{Payloads: out}, &v) },
			"%s: a run's input panics, so the workflow task fails, not the run", tc.name)
		var raw converter.RawValue
		require.NoError(t, inWorkflow.FromPayload(out[0], &raw), "%s: a raw value (a signal) still passes", tc.name)
	}

	out, err := refusing{right, true}.Decode([]*commonpb.Payload{plain})
	require.NoError(t, err)
	dc := refusingConverter{DataConverter: converter.GetDefaultDataConverter(), k: right}
	var v map[string]string
	require.ErrorIs(t, dc.WithWorkflowContext(nil).FromPayload(out[0], &v), ErrUnsealed, "a plain payload is refused, not retried")
}
