package intake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/acme/smsorch/starter"
)

// decodeEvent reads the one event a body holds. It refuses what
// encoding/json would otherwise let through silently: a field it does
// not know (a misspelt "recipent" would drop the number), a field given
// twice (the decoder keeps the last, case-insensitively, so
// {"to":"+31…","TO":"+972…"} sends where a signer who read the first
// did not expect), and data after the event (a second event that would
// never be started, or a proxy's mangling).
func decodeEvent(body []byte) (starter.Event, error) {
	var e starter.Event
	if err := noDuplicateFields(body); err != nil {
		return e, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return e, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return e, fmt.Errorf("data after the event at byte %d: send one JSON object per request", dec.InputOffset())
	}
	return e, nil
}

// noDuplicateFields reports the first field that an object in body
// names twice, comparing names as encoding/json matches them to struct
// fields: without regard to case. A body that is not JSON is left for
// the decoder to describe.
func noDuplicateFields(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	// Each open container: nil for an array, the names seen for an
	// object; expectName says the next string of an object is a name.
	var open []map[string]bool
	expectName := false
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the end, or not JSON: Decode says which
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				open = append(open, map[string]bool{})
				expectName = true
				continue
			case '[':
				open = append(open, nil)
			default:
				open = open[:len(open)-1]
			}
		case string:
			if expectName {
				name := strings.ToLower(v)
				if open[len(open)-1][name] {
					return fmt.Errorf("the field %q is given twice: give each field once", v)
				}
				open[len(open)-1][name] = true
				expectName = false
				continue
			}
		}
		// A value ended (or an array began): in an object, a name comes next.
		expectName = len(open) > 0 && open[len(open)-1] != nil
	}
}
