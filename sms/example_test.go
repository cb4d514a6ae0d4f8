package sms_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/acme/smsorch/sms"
)

// Check an event before anything is sent: the recipient in E.164, the
// key free of the number, the text's encoding and segments.
func ExampleCheck() {
	c, err := sms.Check(sms.Event{Key: "order-58213-shipped", Provider: "sendy", To: "+972 50-123-4567", From: "MyShop",
		Text: "Your order has shipped — track it in the app."}, time.Now())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.To.E164, c.Provider, c.Text.Encoding, c.Text.Segments)

	_, err = sms.Check(sms.Event{Key: "otp-972501234567-1", Provider: "sendy", To: "+972501234567", Text: "Your code is 4821"}, time.Now())
	var fe *sms.FieldError
	if errors.As(err, &fe) {
		fmt.Println("refused:", fe.Field)
	}
	// Output:
	// +972501234567 sendy UCS-2 1
	// refused: key
}

// Mask a phone number for a log line: the country code and the last two
// digits.
func ExampleMaskPhone() {
	fmt.Println(sms.MaskPhone("+31612345678"))
	// Output: +31…78
}
