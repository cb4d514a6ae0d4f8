package sms

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// National numbers written with a separator, the way Dutch mobiles are
// usually written ("06-12345678"), are masked too: neither the
// international patterns nor the bare-digits one find them.
func TestNationalNumbersWithSeparatorsAreMasked(t *testing.T) {
	t.Parallel()
	digits := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return r
			}
			return -1
		}, s)
	}
	for _, in := range []string{
		"customer called from 06-12345678",
		"customer called from 06 12345678",
		"customer called from 06 12 34 56 78",
		"customer called from (06) 1234 5678",
	} {
		require.NotContains(t, digits(MaskPhones(in)), "0612345678", "%s -> %s", in, MaskPhones(in))
	}
}
