package sms

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMaskPhone(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"+972501234567":   "+972…67",
		"+31612345678":    "+31…78",
		"+14155550123":    "+1…23",
		"+4412345":        "+44…45",
		"+123":            "…",
		"+31 6 1234 5678": "+31…78",
		"0612345678":      "…78",
	} {
		require.Equal(t, want, MaskPhone(in), in)
	}
}

func TestMaskPhonesInText(t *testing.T) {
	t.Parallel()
	got := MaskPhones("send to +972501234567 and +31612345678; order 1757404892")
	require.Equal(t, "send to +972…67 and +31…78; order 1757404892", got)
	for in, want := range map[string]string{
		"call +31 6 1234 5678 now":        "call +31…78 now",
		"to (+31) 612-345-678":            "to (+31…78",
		"to 0031612345678, please":        "to +31…78, please",
		"number 31612345678 refused":      "number +31…78 refused",
		"972501234567":                    "+972…67",
		"national 0612345678 too":         "national …78 too",
		"key order-58213-shipped stays":   "key order-58213-shipped stays",
		"otp-8412-17574048920001 stays":   "otp-8412-17574048920001 stays",
		"order-1~resend-2 and 1757404892": "order-1~resend-2 and 1757404892",
		"sent at 2026-11-30T18:44:23Z":    "sent at 2026-11-30T18:44:23Z",
	} {
		got := MaskPhones(in)
		require.Equal(t, want, got, in)
	}
}
