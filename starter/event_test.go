package starter

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/keys"
	"github.com/acme/smsorch/sms"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func good() Event {
	return Event{Kind: "order", ID: "58213", Stage: "shipped", To: "+31612345678", Text: "Order 58213 has shipped.", Provider: "bird"}
}

func TestValidateRefusesWithTheFix(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		mutate func(*Event)
		field  string
		fix    string
	}{
		{"malformed number", func(e *Event) { e.To = "+31 6 12ab" }, "to", "not a phone number"},
		{"letters only", func(e *Event) { e.To = "call me" }, "to", "has no country code"},
		{"no country code", func(e *Event) { e.To = "0612345678" }, "to", "write it in international form with '+' and the country code"},
		{"00 prefix", func(e *Event) { e.To = "0031612345678" }, "to", "write the international prefix as '+', for example +31612345678"},
		{"too short for the country", func(e *Event) { e.To = "+316123" }, "to", "check the digits and the country code"},
		{"empty number", func(e *Event) { e.To = "" }, "to", "give the phone number in international form"},
		{"empty text", func(e *Event) { e.Text = "" }, "text", "write the message to send"},
		{"blank text", func(e *Event) { e.Text = " \n " }, "text", "write the message to send"},
		{"oversize GSM-7 text", func(e *Event) { e.Text = strings.Repeat("a", 1531) }, "text", "shorten it to at most 1530 GSM-7 characters"},
		{"oversize UCS-2 text", func(e *Event) { e.Text = strings.Repeat("ж", 671) }, "text", "shorten it to at most 670 characters"},
		{"key with spaces", func(e *Event) { *e = Event{Key: "order 58213", To: e.To, Text: e.Text, Provider: "bird"} }, "key", "printable ASCII without spaces"},
		{"key is the recipient", func(e *Event) { *e = Event{Key: "phone-0612345678", To: e.To, Text: e.Text, Provider: "bird"} }, "key", "derive it from the event instead"},
		{"key names the recipient", func(e *Event) { *e = Event{Key: "sms-to-0612345678", To: e.To, Text: e.Text, Provider: "bird"} }, "key", "names the person"},
		{"key carries the number", func(e *Event) { *e = Event{Key: "otp-31612345678-1", To: e.To, Text: e.Text, Provider: "bird"} }, "key", "derive it from the business event"},
		{"OTP user id is the number", func(e *Event) {
			*e = Event{OTPUser: "0612345678", OTPAttempt: "1", To: e.To, Text: e.Text, Provider: "bird"}
		}, "key", "otp-<user-id>-<n>"},
		{"event id is the number", func(e *Event) { e.ID = "612345678" }, "key", "contains the recipient's number"},
		{"uppercase kind", func(e *Event) { e.Kind = "Order" }, "key", "name the entity in lowercase"},
		{"missing stage", func(e *Event) { e.Stage = "" }, "key", `name the event, for example "shipped"`},
		{"no key at all", func(e *Event) { e.Kind, e.ID, e.Stage = "", "", "" }, "key", "give kind, id and stage"},
		{"two keys", func(e *Event) { e.Key = "order-1-shipped" }, "key", "not several"},
		{"tilde", func(e *Event) { e.ID = "58~213" }, "key", "reserved for resend keys"},
		{"resend key as event key", func(e *Event) {
			*e = Event{Key: "order-1-shipped~resend-1", To: e.To, Text: e.Text, Provider: "bird"}
		}, "key", "start the event with its own key (order-1-shipped)"},
		{"unknown provider", func(e *Event) { e.Provider = "twilio" }, "provider", `use "bird" or "sendy"`},
		{"sender on bird", func(e *Event) { e.From = "MyShop" }, "from", "leave the sender empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := good()
			tc.mutate(&e)
			_, err := Validate(e, now)
			require.True(t, errors.Is(err, ErrInvalid), "%v", err)
			var ie *InvalidError
			require.True(t, errors.As(err, &ie))
			require.Equal(t, tc.field, ie.Field)
			require.ErrorContains(t, err, tc.fix)
		})
	}
}

func TestValidateCountsSegments(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		text     string
		encoding sms.Encoding
		segments int
	}{
		{strings.Repeat("x", 160), sms.GSM7, 1},
		{strings.Repeat("x", 161), sms.GSM7, 2},
		{strings.Repeat("x", 306), sms.GSM7, 2},
		{strings.Repeat("x", 307), sms.GSM7, 3},
		{strings.Repeat("ש", 70), sms.UCS2, 1},
		{strings.Repeat("ש", 71), sms.UCS2, 2},
		{strings.Repeat("ש", 134), sms.UCS2, 2},
		{strings.Repeat("ש", 135), sms.UCS2, 3},
	} {
		e := good()
		e.Text = tc.text
		p, err := Validate(e, now)
		require.NoError(t, err)
		require.Equal(t, tc.encoding, p.Text.Encoding, "%d runes", len([]rune(tc.text)))
		require.Equal(t, tc.segments, p.Text.Segments, "%d runes of %s", len([]rune(tc.text)), tc.encoding)
	}
}

func TestValidateNormalisesAndWarns(t *testing.T) {
	t.Parallel()
	e := good()
	e.To = "+31 6 1234 5678"
	p, err := Validate(e, now)
	require.NoError(t, err)
	require.Equal(t, keys.Key("order-58213-shipped"), p.Key)
	require.Equal(t, "+31612345678", p.Input.To)
	require.Empty(t, p.Warnings)

	otp := Event{OTPUser: "8412", OTPAttempt: "1795953600", To: "+972501234567", Text: "Your code is 123456", Provider: "sendy", From: "MyShop"}
	p, err = Validate(otp, now)
	require.NoError(t, err)
	require.Equal(t, keys.Key("otp-8412-1795953600"), p.Key)
	require.Len(t, p.Warnings, 2, "a fresh timestamp in the key, and a number outside the known ranges")
	require.Contains(t, p.Warnings[1], "reads as the time")
	require.Equal(t, "MyShop", p.Input.From)
}

// A key that carries the recipient's number is refused before anything
// starts: the starter has no Temporal client here, and Send never needs one.
func TestSendRefusesAKeyWithTheNumberBeforeStarting(t *testing.T) {
	t.Parallel()
	e := Event{Key: "otp-31612345678-1", To: "+31612345678", Text: "Your code is 482913", Provider: "sendy"}
	res, err := New(nil).Send(context.Background(), e)
	var ie *InvalidError
	require.True(t, errors.As(err, &ie), "%v", err)
	require.Equal(t, "key", ie.Field)
	require.ErrorIs(t, err, keys.ErrRecipient)
	require.ErrorContains(t, err, "Idempotency-Key and its workflow id")
	require.NotContains(t, err.Error(), "31612345678", "the error masks the number")
	require.False(t, res.Started)
	require.Empty(t, res.RunID)
}
