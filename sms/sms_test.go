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
	require.Contains(t, got.Warning, "+97250…67", "the warning masks the number: it reaches timelines and logs")
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
