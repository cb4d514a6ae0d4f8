package keys

import (
	"strings"
	"testing"
)

// FuzzParse: whatever arrives, Parse either refuses it or returns a key that
// is safe as a workflow id and a header value and parses to itself.
// Run the fuzzer with: go test ./keys -run '^$' -fuzz FuzzParse
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"order-58213-shipped", "order-58213-shipped~resend-1", "", " ", "~", "~resend-1",
		"phone-0501234567", "+972501234567", "otp-8412-1757404892", "a~resend-01",
		strings.Repeat("x", 256), "ключ", "order-1\x00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := Parse(s)
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("Parse(%q) returned %T, want *Error", s, err)
			}
			return
		}
		if len(k) == 0 || len(k) > MaxLen {
			t.Fatalf("Parse(%q) accepted a key of %d bytes", s, len(k))
		}
		for i := 0; i < len(k); i++ {
			if k[i] <= ' ' || k[i] > '~' {
				t.Fatalf("Parse(%q) accepted byte 0x%02x", s, k[i])
			}
		}
		if again, err := Parse(string(k)); err != nil || again != k {
			t.Fatalf("Parse is not idempotent on %q: %q, %v", k, again, err)
		}
	})
}

// FuzzEvent: a derived key is valid, deterministic, and splits back into the
// parts it came from, so two different events never share a key.
func FuzzEvent(f *testing.F) {
	f.Add("order", "58213", "shipped")
	f.Add("otp", "8412", "7")
	f.Add("order", "58213-shipped", "x")
	f.Add("user_invite", "550e8400-e29b-41d4-a716-446655440000", "sent")
	f.Add("order", "0501234567", "shipped")
	f.Fuzz(func(t *testing.T, kind, id, stage string) {
		k, err := Event(kind, id, stage)
		if err != nil {
			return
		}
		if _, err := Parse(string(k)); err != nil {
			t.Fatalf("Event(%q, %q, %q) = %q, which Parse refuses: %v", kind, id, stage, k, err)
		}
		if again, _ := Event(kind, id, stage); again != k {
			t.Fatalf("Event is not deterministic: %q then %q", k, again)
		}
		s := string(k)
		first, last := strings.Index(s, sep), strings.LastIndex(s, sep)
		if s[:first] != kind || s[first+1:last] != id || s[last+1:] != stage {
			t.Fatalf("key %q does not split back into (%q, %q, %q)", k, kind, id, stage)
		}
		r, err := Resend(k, 1)
		if err != nil {
			t.Fatalf("Resend(%q, 1): %v", k, err)
		}
		if base, n, ok := SplitResend(r); !ok || base != k || n != 1 {
			t.Fatalf("SplitResend(%q) = %q, %d, %v", r, base, n, ok)
		}
	})
}
