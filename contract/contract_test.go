package contract

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// The UI's and the CLI's signal forms send JSON; "force" is read from it,
// and only a resend may carry it.
func TestParseSignalReadsForce(t *testing.T) {
	t.Parallel()
	d, err := ParseSignal(ActionResend, json.RawMessage(`{"reason":"customer called","by":"alice","force":true}`))
	require.NoError(t, err)
	require.Equal(t, Decision{Action: ActionResend, Reason: "customer called", By: "alice", Force: true}, d)

	d, err = ParseSignal(ActionResend, json.RawMessage(`{"reason":"r","by":"b"}`))
	require.NoError(t, err)
	require.False(t, d.Force)

	_, err = ParseSignal(ActionCancel, json.RawMessage(`{"reason":"r","by":"b","force":true}`))
	require.ErrorContains(t, err, `"force" applies to a resend only`)

	_, err = ParseSignal(ActionResend, json.RawMessage(`{"reason":"r","by":"b","force":"yes"}`))
	require.ErrorContains(t, err, `a resend may add "force": true`)
}
