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

// Numbers written with the characters other keyboards, locales and URLs
// give them are masked too: no-break and thin spaces, a full-width plus,
// a percent-encoded "+" or space, and the digits of other scripts (issue
// 35: each of these reached an error string unmasked).
func TestMaskPhonesAcrossScriptsAndEncodings(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"call +31\u00a06\u00a01234\u00a05678 now":                                      "call +31…78 now", // no-break spaces
		"call +31\u202f6\u202f1234\u202f5678 now":                                      "call +31…78 now", // narrow no-break spaces
		"call +31\u20096 1234 5678 now":                                                "call +31…78 now", // a thin space
		"to \uff0b31612345678 now":                                                     "to +31…78 now",   // a full-width plus
		"GET /v1/lookup?to=%2B31612345678 failed":                                      "GET /v1/lookup?to=+31…78 failed",
		"to=%2b31%206%2012345678":                                                      "to=+31…78",
		"to +\u0669\u0667\u0662\u0665\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667": "to +972…67", // Arabic-Indic digits
		"to \uff0b\uff13\uff11\uff16\uff11\uff12\uff13\uff14\uff15\uff16\uff17\uff18":  "to +31…78",  // full-width digits
		"\u0966\u096c\u0967\u0968\u0969\u096a\u096b\u096c\u096d\u096e":                 "…78",        // Devanagari, national
		"order-58213-shipped stays":                                                    "order-58213-shipped stays",
	} {
		got := MaskPhones(in)
		require.Equal(t, want, got, "%q", in)
		require.NotContains(t, got, "12345678", "%q", in)
	}
	require.Equal(t, "été 5 €", MaskPhones("été 5 €"), "text without a number keeps its letters")
}

// BenchmarkMaskPhones masks a timeline entry as the run writes it (an
// already masked number, so non-ASCII) and one with a number in another
// script.
func BenchmarkMaskPhones(b *testing.B) {
	for name, s := range map[string]string{
		"masked":        "accepted as message m-1 on attempt 1 for +31…78; the run follows it",
		"arabic digits": "customer called from +\u0669\u0667\u0662\u0665\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667 twice",
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = MaskPhones(s)
			}
		})
	}
}
