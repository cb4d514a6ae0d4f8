package intake

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// What a client commonly sends around one event is still one event;
// duplicate names are found at every depth, and only within one object.
func TestDecodeEventTakesOneEventAndEachFieldOnce(t *testing.T) {
	t.Parallel()
	e, err := decodeEvent([]byte(" \n" + event + "\r\n"))
	require.NoError(t, err, "whitespace around the event, as curl -d @file sends it")
	require.Equal(t, "+31612345678", e.To)

	require.NoError(t, noDuplicateFields([]byte(`{"a":{"b":1},"b":[{"b":1},{"b":2}],"c":[1,"a","a"]}`)),
		"the same name in different objects, and repeated string values, are not duplicates")
	require.ErrorContains(t, noDuplicateFields([]byte(`{"a":[{"b":1,"B":2}]}`)), `the field "B" is given twice`)
	require.ErrorContains(t, noDuplicateFields([]byte(`{"a":{"x":1},"c":{"y":{"z":1}},"A":2}`)), `the field "A" is given twice`)
	require.NoError(t, noDuplicateFields([]byte(`not json`)), "left for the decoder to describe")

	_, err = decodeEvent([]byte(event + `{}`))
	require.ErrorContains(t, err, "data after the event")
}
