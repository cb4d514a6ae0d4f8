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
