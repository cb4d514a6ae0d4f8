package cli

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/contract"
)

// smsctl status prints each timeline entry with its kind in a column of
// its own, so a person or a script reads the kind at a fixed place.
func TestStatusPrintsTheKindOfEachTimelineEntry(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	st := contract.Status{
		Result:   contract.Result{Key: "order-58213-shipped", State: contract.Delivered, Reason: "delivered as message m-1", MessageIDs: []string{"m-1"}, Attempts: 1, KeysUsed: []string{"order-58213-shipped"}, DeliveryStatus: "delivered"},
		Provider: "bird",
		To:       "+31…78",
		Timeline: []contract.Entry{
			{At: at, Kind: contract.KindSending, Text: "sending with key order-58213-shipped (retries until 2026-12-01T09:31:00Z)"},
			{At: at, Kind: contract.KindAccepted, Text: "accepted as message m-1 on attempt 1"},
			{At: at.Add(10 * time.Second), Kind: contract.KindAwaitingDecision, Text: "a kind as long as any"},
		},
	}
	var b bytes.Buffer
	writeStatus(&b, st)
	require.Equal(t, `order-58213-shipped: Delivered
  delivered as message m-1
  to +31…78 via bird; keys order-58213-shipped
  messages: m-1 (delivery: delivered); attempts 1, replays 0
  timeline:
    2026-12-01 09:30:00  sending            sending with key order-58213-shipped (retries until 2026-12-01T09:31:00Z)
    2026-12-01 09:30:00  accepted           accepted as message m-1 on attempt 1
    2026-12-01 09:30:10  awaiting-decision  a kind as long as any
`, b.String())
}
