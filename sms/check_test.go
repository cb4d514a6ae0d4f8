package sms

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/keys"
)

// Each rule of the one event check names the field it is about.
func TestCheckNamesTheField(t *testing.T) {
	t.Parallel()
	ok := Event{Key: "order-58213-shipped", Provider: "sendy", To: "+31612345678", From: " MyShop ", Text: "Your order shipped"}
	c, err := Check(ok, time.Now())
	require.NoError(t, err)
	require.Equal(t, "+31612345678", c.To.E164)
	require.Equal(t, "MyShop", c.From)
	require.EqualValues(t, "sendy", c.Provider)
	require.Empty(t, c.Fallback)

	e := ok
	e.Provider, e.From, e.Fallback = "bird", "", "sendy"
	c, err = Check(e, time.Now())
	require.NoError(t, err)
	require.EqualValues(t, "sendy", c.Fallback)
	e.Provider, e.From, e.Fallback = "sendy", "MyShop", "bird"
	_, err = Check(e, time.Now())
	require.ErrorContains(t, err, "could not be kept on a failover to Bird")
	e.Fallback = "twilio"
	_, err = Check(e, time.Now())
	require.ErrorContains(t, err, "twilio")

	for field, change := range map[string]func(*Event){
		"to":       func(e *Event) { e.To = "0612" },
		"key":      func(e *Event) { e.Key = keys.Key("phone-31612345678") },
		"text":     func(e *Event) { e.Text = " " },
		"provider": func(e *Event) { e.Provider = "twilio" },
		"from":     func(e *Event) { e.Provider = "bird" },
		"fallback": func(e *Event) { e.Fallback = "sendy" },
	} {
		e := ok
		change(&e)
		_, err := Check(e, time.Now())
		var fe *FieldError
		require.True(t, errors.As(err, &fe), "%s: %v", field, err)
		require.Equal(t, field, fe.Field, err.Error())
	}
}

// A key that carries the recipient's number, in any usual written form,
// is refused: the key shows in Temporal's UI, search attributes and logs
// and in the provider's records, so it would spread the number there.
func TestCheckRefusesAKeyThatCarriesTheNumber(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		to   string
		keys []keys.Key
	}{
		{"+31612345678", []keys.Key{
			"otp-31612345678-1",          // E.164 digits
			"otp-612345678-1",            // national significant number
			"otp-0612345678-1",           // national form, trunk prefix
			"welcome-0031612345678-sent", // international prefix 00
			"order-58213-shipped_to_612345678",
			"otp-8412-0612345678",
		}},
		{"+14155552671", []keys.Key{"otp-14155552671-1", "otp-4155552671-1", "signup-4155552671-welcome"}},
		// Outside the known ranges (accepted with a warning), still a number.
		{"+972501234567", []keys.Key{"otp-0501234567-7", "welcome-501234567-sent", "otp-972501234567-7"}},
	} {
		for _, k := range tc.keys {
			e := Event{Key: k, Provider: "sendy", To: tc.to, Text: "Your code is 482913"}
			_, err := Check(e, time.Now())
			var fe *FieldError
			require.True(t, errors.As(err, &fe), "%s to %s: %v", k, tc.to, err)
			require.Equal(t, "key", fe.Field, err.Error())
			require.ErrorIs(t, err, keys.ErrRecipient, k)
			for _, says := range []string{"contains the recipient's number", "Idempotency-Key", "workflow id", "Temporal's UI", "the provider's records",
				"derive it from the business event", "otp-<user-id>-<n>"} {
				require.ErrorContains(t, err, says, k)
			}
			// The error itself goes to logs and answers: it masks the number.
			require.NotContains(t, err.Error(), tc.to[len(tc.to)-7:], k)
		}
	}
	// The run that is the number is masked, not the same digits inside
	// another run before it.
	_, err := Check(Event{Key: "order-16123456789-for-612345678", Provider: "sendy", To: "+31612345678", Text: "hi"}, time.Now())
	require.ErrorContains(t, err, `sms key "order-16123456789-for-…78": contains the recipient's number (as …78)`)
	// Other digits, or the number inside a longer run, are another id.
	for _, k := range []keys.Key{"order-58213-shipped", "otp-8412-7", "order-612345679-shipped", "order-16123456789-shipped",
		"otp-8412-1757404892", "order-58213-shipped~resend-1"} {
		_, err := Check(Event{Key: k, Provider: "sendy", To: "+31612345678", Text: "hi"}, time.Now())
		require.NoError(t, err, k)
	}
}
