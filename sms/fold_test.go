package sms

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A digit of any script is read as its value, in runs of ten from zero.
func TestDigitValue(t *testing.T) {
	t.Parallel()
	require.Equal(t, 7, digitValue('\u0667'))     // Arabic-Indic seven
	require.Equal(t, 0, digitValue('\uff10'))     // full-width zero
	require.Equal(t, 9, digitValue('\U0001d7ff')) // the last of the mathematical digits' five runs
}
