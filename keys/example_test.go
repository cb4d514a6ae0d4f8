package keys_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/acme/smsorch/keys"
)

// The key of a business event: the same order and stage always give the same key.
func ExampleEvent() {
	k, err := keys.Event("order", "58213", "shipped")
	if err != nil {
		panic(err)
	}
	fmt.Println(k)
	// Output: order-58213-shipped
}

// A one-time code: a "send the code again" press creates a new attempt id in
// your database, and so a new key.
func ExampleOTP() {
	first, _ := keys.OTP("8412", "7")
	again, _ := keys.OTP("8412", "8")
	fmt.Println(first, again)
	// Output: otp-8412-7 otp-8412-8
}

// The key of a resend decided by a person is derived from the event key.
func ExampleResend() {
	k, _ := keys.Resend("order-58213-shipped", 1)
	event, n, _ := keys.SplitResend(k)
	fmt.Println(k, event, n)
	// Output: order-58213-shipped~resend-1 order-58213-shipped 1
}

// Keys that arrive as strings are validated; errors say what to fix.
func ExampleParse() {
	_, err := keys.Parse("phone-0501234567")
	fmt.Println(errors.Is(err, keys.ErrRecipient))
	_, err = keys.Parse("order 58213")
	fmt.Println(err)
	// Output:
	// true
	// sms key "order 58213": has a space at byte 5; keys are printable ASCII without spaces; use the entity's id as stored (digits, letters, '-', '_'), not a name or free text
}

// A key that carries the clock protects nothing.
func ExampleWarnings() {
	now := time.Date(2025, 9, 10, 0, 0, 0, 0, time.UTC)
	for _, w := range keys.Warnings("otp-8412-1757404892", now) {
		fmt.Println(w.Code)
	}
	// Output: timestamp
}
