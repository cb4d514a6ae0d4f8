package codec

import (
	"testing"

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
	out, err := refusing{k}.Decode([]*commonpb.Payload{sealed[0], unknownKey, tampered})
	require.NoError(t, err, "one bad payload must not fail the whole response (the run's every workflow task)")
	require.False(t, Unsealed(out[0]), "the sealed one opens")
	require.True(t, Unsealed(out[1]), "an unknown key id is refused (marked), so a decision is refused in the timeline")
	require.True(t, Unsealed(out[2]), "a payload that does not open is refused (marked)")
}
