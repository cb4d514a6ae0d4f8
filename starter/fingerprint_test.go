package starter

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/acme/smsorch/codec/unsealed"
	"github.com/acme/smsorch/contract"
)

// memoTemporal is an existing open run whose memo holds memo (nil: no
// memo field), and whose history holds input; it counts history reads.
type memoTemporal struct {
	preEncryptionTemporal
	memo        *commonpb.Payload
	historyRead int
}

func (f *memoTemporal) DescribeWorkflowExecution(_ context.Context, id, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	info := &workflowpb.WorkflowExecutionInfo{
		Execution: &commonpb.WorkflowExecution{WorkflowId: id, RunId: "run-1"},
		Status:    enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
	}
	if f.memo != nil {
		info.Memo = &commonpb.Memo{Fields: map[string]*commonpb.Payload{FingerprintMemo: f.memo}}
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: info}, nil
}

func (f *memoTemporal) GetWorkflowHistory(ctx context.Context, id, runID string, long bool, filter enumspb.HistoryEventFilterType) client.HistoryEventIterator {
	f.historyRead++
	return f.preEncryptionTemporal.GetWorkflowHistory(ctx, id, runID, long, filter)
}

func TestASecondStartOfTheSameMessageReadsNoHistory(t *testing.T) {
	t.Parallel()
	e := Event{Kind: "order", ID: "58213", Stage: "shipped", To: "+31 6 12345678", Text: "Order 58213 has shipped.", Provider: "bird"}
	plan, err := Validate(e, now)
	require.NoError(t, err)
	same := plan.Input
	payload := func(v any) *commonpb.Payload {
		p, err := converter.GetDefaultDataConverter().ToPayload(v)
		require.NoError(t, err)
		return p
	}
	otherText := same
	otherText.Text = "Order 58213 was cancelled."
	otherKey := same
	otherKey.Key = "order-58214-shipped"
	for _, tc := range []struct {
		name    string
		memo    *commonpb.Payload
		history contract.Input
		field   string // the conflict named, "" for none
		reads   int    // history reads
	}{
		{"the same message", payload(fingerprint(same)), same, "", 0},
		// The intake's client marks what was written before encryption.
		{"the same message, memo from before encryption", unsealed.Mark(payload(fingerprint(same))), same, "", 0},
		{"another text: the history names the field", payload(fingerprint(otherText)), otherText, "text", 1},
		{"a run without the memo", nil, same, "", 1},
		{"a run without the memo, another text", nil, otherText, "text", 1},
		// A run under this id whose input (and memo) were another
		// event's: copied sealed payloads are not this event's run.
		{"another event's input and memo", payload(fingerprint(otherKey)), otherKey, "event key", 1},
		{"a memo that does not decode", &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("binary/sealed-elsewhere")}, Data: []byte{1, 2}}, same, "", 1},
		// A fingerprint that differs while the input is the same (a
		// later scheme): the input decides.
		{"a stale fingerprint of the same message", payload("v0:abc"), same, "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &memoTemporal{preEncryptionTemporal: preEncryptionTemporal{input: tc.history}, memo: tc.memo}
			res, err := New(f).Send(context.Background(), e)
			require.Equal(t, tc.reads, f.historyRead, "history reads")
			require.False(t, res.Started)
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			var ce *ConflictError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, tc.field, ce.Field)
		})
	}
}

// The fingerprint tells apart every field a second start is compared on,
// and a field's end from the next one's start.
func TestFingerprintSeparatesTheFields(t *testing.T) {
	t.Parallel()
	base := contract.Input{Key: "order-1-shipped", Provider: "sendy", To: "+31612345678", Text: "Your code is 123456", From: "Acme"}
	seen := map[string]string{fingerprint(base): "base"}
	for name, in := range map[string]contract.Input{
		"provider":      {Key: base.Key, Provider: "bird", To: base.To, Text: base.Text, From: base.From},
		"recipient":     {Key: base.Key, Provider: base.Provider, To: "+31612345679", Text: base.Text, From: base.From},
		"text":          {Key: base.Key, Provider: base.Provider, To: base.To, Text: "Your code is 123457", From: base.From},
		"sender":        {Key: base.Key, Provider: base.Provider, To: base.To, Text: base.Text, From: "Acme2"},
		"text's end":    {Key: base.Key, Provider: base.Provider, To: base.To, Text: base.Text + "A", From: "cme"},
		"no sender":     {Key: base.Key, Provider: base.Provider, To: base.To, Text: base.Text},
		"another event": {Key: "order-2-shipped", Provider: base.Provider, To: base.To, Text: base.Text, From: base.From},
		// Exactly as given: a sender with spaces is another fingerprint,
		// and the history's compare (which trims the run's) decides.
		"untrimmed sender": {Key: base.Key, Provider: base.Provider, To: base.To, Text: base.Text, From: " Acme "},
	} {
		fp := fingerprint(in)
		require.NotContains(t, seen, fp, "%s collides with %s", name, seen[fp])
		seen[fp] = name
	}
}

// A plan started without Validate keeps the compare it had before the
// fingerprint: the run's sender is trimmed, the new one is not.
func TestAnUntrimmedSenderIsComparedAsBefore(t *testing.T) {
	t.Parallel()
	existing := contract.Input{Key: "order-1-shipped", Provider: "sendy", To: "+31612345678", Text: "Shipped.", From: "Acme"}
	memo, err := converter.GetDefaultDataConverter().ToPayload(fingerprint(existing))
	require.NoError(t, err)
	plan := Plan{Key: "order-1-shipped", Input: existing}
	plan.Input.From = " Acme "
	f := &memoTemporal{preEncryptionTemporal: preEncryptionTemporal{input: existing}, memo: memo}
	_, err = New(f).Start(context.Background(), plan)
	var ce *ConflictError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "sender", ce.Field)
	require.Equal(t, 1, f.historyRead)

	// And the other way round: the run's untrimmed sender, trimmed, is the new one's.
	untrimmed := existing
	untrimmed.From = " Acme "
	memo, err = converter.GetDefaultDataConverter().ToPayload(fingerprint(untrimmed))
	require.NoError(t, err)
	f = &memoTemporal{preEncryptionTemporal: preEncryptionTemporal{input: untrimmed}, memo: memo}
	_, err = New(f).Start(context.Background(), Plan{Key: "order-1-shipped", Input: existing})
	require.NoError(t, err)
}
