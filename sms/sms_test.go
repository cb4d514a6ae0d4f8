package sms

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseRecipient(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"+31612345678":      "+31612345678",
		"+31 6 1234 5678":   "+31612345678",
		" +972-50-234-5678": "+972502345678",
		"+1 (415) 555-2671": "+14155552671",
	} {
		got, err := ParseRecipient(in)
		require.NoError(t, err, in)
		require.Equal(t, Recipient{E164: want}, got, in)
	}
	// A possible number outside the ranges the metadata knows is accepted
	// with a warning: stale metadata must not lose a real customer's SMS.
	got, err := ParseRecipient("+972501234567")
	require.NoError(t, err)
	require.Equal(t, "+972501234567", got.E164)
	require.Contains(t, got.Warning, "outside the number ranges known to be in use for +972")
	require.Contains(t, got.Warning, "+972…67", "the warning masks the number: it reaches timelines and logs")
	for in, fix := range map[string]string{
		"":                  "international form",
		"0501234567":        "no country code",
		"050-123-4567":      "+972501234567",
		"0031612345678":     "write the international prefix as '+', for example +31612345678",
		"+":                 "E.164",
		"+abc":              "is not a phone number: it contains 'a'",
		"+31 6 1234 567x":   "write only digits after the '+'",
		"+31 6 1234":        "is not a mobile number of country code +31",
		"+999123456789":     "E.164",
		"+3161234567899999": "is not a mobile number of country code +31",
	} {
		_, err := ParseRecipient(in)
		require.Error(t, err, in)
		require.True(t, errors.Is(err, ErrInvalid), in)
		require.ErrorContains(t, err, fix, in)
	}
}

func TestInspectTextSegmentBoundaries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		text     string
		encoding Encoding
		units    int
		segments int
	}{
		{"GSM-7 160 fits one", strings.Repeat("a", 160), GSM7, 160, 1},
		{"GSM-7 161 needs two", strings.Repeat("a", 161), GSM7, 161, 2},
		{"GSM-7 306 is two of 153", strings.Repeat("a", 306), GSM7, 306, 2},
		{"GSM-7 307 needs three", strings.Repeat("a", 307), GSM7, 307, 3},
		{"extension chars count two", strings.Repeat("€", 80), GSM7, 160, 1},
		{"extension char tips over", strings.Repeat("a", 159) + "€", GSM7, 161, 2},
		{"UCS-2 70 fits one", strings.Repeat("ש", 70), UCS2, 70, 1},
		{"UCS-2 71 needs two", strings.Repeat("ש", 71), UCS2, 71, 2},
		{"UCS-2 134 is two of 67", strings.Repeat("ש", 134), UCS2, 134, 2},
		{"UCS-2 135 needs three", strings.Repeat("ש", 135), UCS2, 135, 3},
		{"one emoji makes it UCS-2 and counts two", strings.Repeat("a", 68) + "🙂", UCS2, 70, 1},
		{"GSM accents stay GSM-7", "Pedido enviado: à été Ñ ü", GSM7, 25, 1},
		{"a cedilla-less ç is UCS-2", "ça va", UCS2, 5, 1},
	} {
		got, err := InspectText(tc.text)
		require.NoError(t, err, tc.name)
		require.Equal(t, Text{tc.encoding, tc.units, tc.segments}, got, tc.name)
	}
}

// A handset or SMSC never splits an escape pair (ESC and the extension
// character) or a surrogate pair (an emoji) across two segments: a
// character that does not fit whole in the current segment starts the
// next one, which can cost a segment more than units divided by 153 or 67.
func TestInspectTextKeepsPairsWhole(t *testing.T) {
	t.Parallel()
	a, shin := func(n int) string { return strings.Repeat("a", n) }, func(n int) string { return strings.Repeat("ש", n) }
	for _, tc := range []struct {
		name     string
		text     string
		encoding Encoding
		units    int
		segments int
	}{
		// GSM-7: single segment up to 160 septets, escape pairs included.
		{"GSM-7 158 plain and one extension fill one", a(158) + "€", GSM7, 160, 1},
		{"GSM-7 159 plain and one extension need two", a(159) + "€", GSM7, 161, 2},
		// 154 septets still fit one segment: only the parts of a
		// concatenated message carry a header and hold 153.
		{"GSM-7 152 plain and one extension fit one", a(152) + "€", GSM7, 154, 1},
		// Concatenated: 152 septets, then € (2) would end at 154, so it
		// moves whole to segment 2, which holds it and 151 more.
		{"GSM-7 € moves whole to segment 2", a(152) + "€" + a(7), GSM7, 161, 2},
		{"GSM-7 € moved, segment 2 full", a(152) + "€" + a(151), GSM7, 305, 2},
		{"GSM-7 € moved, one septet over", a(152) + "€" + a(152), GSM7, 306, 3},
		{"GSM-7 € ends segment 1 exactly", a(151) + "€" + a(153), GSM7, 306, 2},
		{"GSM-7 only extensions: 76 a segment", strings.Repeat("€", 81), GSM7, 162, 2},
		{"GSM-7 only extensions: 153 pairs", strings.Repeat("{", 153), GSM7, 306, 3},
		// UCS-2: single segment up to 70 units, surrogate pairs included.
		{"UCS-2 68 and an emoji fill one", shin(68) + "🙂", UCS2, 70, 1},
		{"UCS-2 69 and an emoji need two", shin(69) + "🙂", UCS2, 71, 2},
		{"UCS-2 66 and an emoji fit one", shin(66) + "🙂", UCS2, 68, 1},
		// Concatenated: 66 units, then the emoji (2) would end at 68, so
		// it moves whole to segment 2.
		{"UCS-2 emoji moves whole to segment 2", shin(66) + "🙂" + shin(3), UCS2, 71, 2},
		{"UCS-2 emoji moved, segment 2 full", shin(66) + "🙂" + shin(65), UCS2, 133, 2},
		{"UCS-2 emoji moved, one unit over", shin(66) + "🙂" + shin(66), UCS2, 134, 3},
		{"UCS-2 emoji ends segment 1 exactly", shin(65) + "🙂" + shin(67), UCS2, 134, 2},
		{"UCS-2 only emoji: 33 a segment", strings.Repeat("🙂", 36), UCS2, 72, 2},
		{"UCS-2 only emoji: 67 of them", strings.Repeat("🙂", 67), UCS2, 134, 3},
	} {
		got, err := InspectText(tc.text)
		require.NoError(t, err, tc.name)
		require.Equal(t, Text{tc.encoding, tc.units, tc.segments}, got, tc.name)
	}
	// 765 € are 1530 septets, the limit in units, but at 76 pairs a
	// segment they need 11 segments: refused.
	_, err := InspectText(strings.Repeat("€", 765))
	require.ErrorContains(t, err, "needs 11 segments")
	got, err := InspectText(strings.Repeat("€", 760))
	require.NoError(t, err, "760 pairs fill 10 segments exactly")
	require.Equal(t, 10, got.Segments)
	_, err = InspectText(strings.Repeat("🙂", 335))
	require.ErrorContains(t, err, "needs 11 segments", "670 units, but 33 emoji a segment")
}

func TestInspectTextRefusesEmptyAndOversize(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "   ", "\n"} {
		_, err := InspectText(s)
		require.ErrorContains(t, err, "text is empty; write the message to send")
	}
	_, err := InspectText(strings.Repeat("a", 153*MaxSegments+1))
	require.ErrorContains(t, err, "needs 11 segments")
	require.ErrorContains(t, err, "shorten it to at most 1530 GSM-7 characters")
	_, err = InspectText(strings.Repeat("ש", 67*MaxSegments+1))
	require.ErrorContains(t, err, "shorten it to at most 670 characters (emoji count two)")
	_, err = InspectText(strings.Repeat("a", 153*MaxSegments))
	require.NoError(t, err, "exactly the limit is allowed")
}
