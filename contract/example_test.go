package contract_test

import (
	"encoding/json"
	"fmt"

	"github.com/acme/smsorch/contract"
)

// Read a decision as the Temporal web UI's or CLI's signal form sends it.
// A decision names the event it is for and an id of its own, so a copy
// of it, or a decision meant for another event, applies nothing.
func ExampleParseSignal() {
	d, err := contract.ParseSignal(contract.SignalResend, json.RawMessage(
		`{"reason": "customer says nothing arrived", "by": "alice", "key": "order-58213-shipped", "id": "ticket-4711"}`))
	fmt.Println(d.Action, d.Key, d.ID, err)

	_, err = contract.ParseSignal(contract.SignalCancel, json.RawMessage(`{"reason": "too late"}`))
	fmt.Println(err != nil)
	// Output:
	// resend order-58213-shipped ticket-4711 <nil>
	// true
}
