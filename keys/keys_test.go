package keys

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestEventIsDeterministic(t *testing.T) {
	t.Parallel()
	// "Run the same code twice on the same database row; the same key must come out."
	row := struct{ ID, Stage string }{"58213", "shipped"}
	a, err := Event("order", row.ID, row.Stage)
	require.NoError(t, err)
	b, err := Event("order", row.ID, row.Stage)
	require.NoError(t, err)
	require.Equal(t, a, b)
	require.Equal(t, Key("order-58213-shipped"), a)
}

func TestEventDistinguishesEvents(t *testing.T) {
	t.Parallel()
	seen := map[Key][3]string{}
	for _, parts := range [][3]string{
		{"order", "58213", "shipped"},
		{"order", "58214", "shipped"},
		{"order", "58213", "delivered"},
		{"order", "58213-shipped", "x"}, // dashes in the id cannot fake another event
		{"order", "58213", "shipped_x"},
		{"otp", "8412", "7"},
		{"otp", "8412", "8"},
		{"user_invite", "550e8400-e29b-41d4-a716-446655440000", "sent"},
	} {
		k, err := Event(parts[0], parts[1], parts[2])
		require.NoError(t, err, parts)
		prev, dup := seen[k]
		require.False(t, dup, "%v and %v share key %s", prev, parts, k)
		seen[k] = parts
	}
}

func TestEventRefusesBadParts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, kind, id, stage string
		sentinel              error
		fix                   string
	}{
		{"empty kind", "", "1", "sent", ErrEmpty, "lowercase"},
		{"uppercase kind", "Order", "1", "sent", ErrPart, "lowercase"},
		{"dash in kind", "my-order", "1", "sent", ErrPart, "lowercase"},
		{"empty id", "order", "", "sent", ErrEmpty, "database id"},
		{"space in id", "order", "58 213", "sent", ErrCharacter, "printable ASCII without spaces"},
		{"non-ASCII id", "order", "5821é", "sent", ErrCharacter, "non-ASCII"},
		{"tab in id", "order", "1\t2", "sent", ErrCharacter, "control character"},
		{"tilde in id", "order", "1~2", "sent", ErrPart, "reserved for resend"},
		{"empty stage", "order", "1", "", ErrEmpty, "name the event"},
		{"dash in stage", "order", "1", "out-for-delivery", ErrPart, "remove the dashes"},
		{"too long", "order", strings.Repeat("9", 240), "sent", ErrTooLong, "shorter id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Event(tc.kind, tc.id, tc.stage)
			require.ErrorIs(t, err, tc.sentinel)
			require.ErrorContains(t, err, tc.fix)
			var ke *Error
			require.True(t, errors.As(err, &ke))
			require.NotEmpty(t, ke.Fix, "every refusal says how to fix it")
		})
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	valid := []string{
		"order-58213-shipped",
		"order-58213-shipped~resend-1",
		"order-58213-shipped~resend-999999",
		"a",
		strings.Repeat("k", MaxEventLen),
		"invoice-2024/11/0042-due", // slashes are printable ASCII and fine in headers and workflow ids
	}
	for _, s := range valid {
		k, err := Parse(s)
		require.NoError(t, err, s)
		require.Equal(t, s, k.String())
	}
	for s, sentinel := range map[string]error{
		"":                                  ErrEmpty,
		strings.Repeat("k", MaxLen+1):       ErrTooLong,
		strings.Repeat("k", MaxEventLen+1):  ErrTooLong,
		"order 58213 shipped":               ErrCharacter,
		"order-58213-shipped\n":             ErrCharacter,
		"order~58213":                       ErrResend,
		"order-1~resend-0":                  ErrResend,
		"order-1~resend-01":                 ErrResend,
		"order-1~resend-1~resend-2":         ErrResend,
		"order-1~resend-1234567":            ErrResend,
		"+972501234567":                     ErrRecipient,
		"phone-0501234567":                  ErrRecipient,
		"tel:+31612345678":                  ErrRecipient,
		"0501234567":                        ErrRecipient,
		"phone-0501234567~resend-1":         ErrRecipient,
		"MSISDN_972501234567":               ErrRecipient,
		"customer-972501234567":             ErrRecipient,
		"\x00":                              ErrCharacter,
		"order-\u00e9":                      ErrCharacter,
		"order-58213-shipped\x7f":           ErrCharacter,
		strings.Repeat("k", 300) + " space": ErrTooLong,
	} {
		_, err := Parse(s)
		require.ErrorIs(t, err, sentinel, "%q", s)
	}
}

func TestResend(t *testing.T) {
	t.Parallel()
	event := Key("order-58213-shipped")
	r1, err := Resend(event, 1)
	require.NoError(t, err)
	r2, err := Resend(event, 2)
	require.NoError(t, err)
	require.Equal(t, Key("order-58213-shipped~resend-1"), r1)
	require.NotEqual(t, event, r1)
	require.NotEqual(t, r1, r2)

	base, n, ok := SplitResend(r2)
	require.True(t, ok)
	require.Equal(t, event, base)
	require.Equal(t, 2, n)
	_, _, ok = SplitResend(event)
	require.False(t, ok)

	_, err = Resend(r1, 1)
	require.ErrorIs(t, err, ErrResend, "a resend of a resend would hide which event it belongs to")
	_, err = Resend(event, 0)
	require.ErrorIs(t, err, ErrResend)
	_, err = Resend(event, MaxResends+1)
	require.ErrorIs(t, err, ErrResend)

	longest := Key(strings.Repeat("k", MaxEventLen))
	r, err := Resend(longest, MaxResends)
	require.NoError(t, err, "every resend of the longest event key still fits")
	require.LessOrEqual(t, len(r), MaxLen)
}

func TestCheckRecipient(t *testing.T) {
	t.Parallel()
	const to = "+972501234567"
	for _, k := range []Key{"phone-0501234567", "972501234567", "sms_to_0501234567", "user-501234567"} {
		require.ErrorIs(t, CheckRecipient(k, to), ErrRecipient, k)
	}
	for _, k := range []Key{
		"order-58213-shipped",
		"welcome-0501234567-sent", // one welcome per number is a real event
		"otp-0501234567-7",        // the attempt id makes it one message
		"order-0501234566-shipped",
	} {
		require.NoError(t, CheckRecipient(k, to), k)
	}
}

func TestWarningsFlagFreshTimestamps(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 9, 10, 0, 0, 0, 0, time.UTC)
	ws := Warnings("otp-8412-1757404892", now) // the example in docs/providers.md
	require.Len(t, ws, 1)
	require.Equal(t, WarnTimestamp, ws[0].Code)
	require.Contains(t, ws[0].Message, "1757404892")
	require.Contains(t, ws[0].Message, "2025-09-09T")
	require.Contains(t, ws[0].Message, "retry as a new message")

	require.Len(t, Warnings("otp-8412-1757404892123", now), 1, "13 digits read as milliseconds")
	require.Empty(t, Warnings("order-58213-shipped", now))
	require.Empty(t, Warnings("order-1000000000-shipped", now), "2001 is not a fresh time")
	require.Empty(t, Warnings("order-9999999999-shipped", now), "2286 is not a fresh time")
	require.Empty(t, Warnings("order-17574048920-shipped", now), "11 digits are not a timestamp")
}

// An event key that looks like a resend key would share that resend's
// Idempotency-Key with the first event's run: ParseEvent refuses it.
func TestParseEventRefusesAResendKey(t *testing.T) {
	t.Parallel()
	k, err := ParseEvent("order-1-shipped")
	require.NoError(t, err)
	require.Equal(t, Key("order-1-shipped"), k)

	_, err = ParseEvent("order-1-shipped~resend-1")
	require.ErrorIs(t, err, ErrResend)
	require.Contains(t, err.Error(), "is the key of resend 1 of the event order-1-shipped, not an event key")
	require.Contains(t, err.Error(), "start the event with its own key (order-1-shipped)")

	// Parse still takes it: the run plans its resends with it.
	_, err = Parse("order-1-shipped~resend-1")
	require.NoError(t, err)
}

// The key at a fallback provider, and its resends: valid keys that name
// their event and provider, refused as event keys, and refused where the
// longest resend after the move would not fit.
func TestViaKeys(t *testing.T) {
	t.Parallel()
	k, err := Via("order-58213-shipped", "sendy")
	require.NoError(t, err)
	require.Equal(t, Key("order-58213-shipped~via-sendy"), k)
	r, err := Resend(k, 2)
	require.NoError(t, err)
	require.Equal(t, Key("order-58213-shipped~via-sendy~resend-2"), r)
	for _, key := range []Key{k, r} {
		_, err := Parse(string(key))
		require.NoError(t, err)
		base, p, ok := SplitVia(key)
		require.True(t, ok)
		require.Equal(t, Key("order-58213-shipped"), base)
		require.Equal(t, "sendy", p)
		require.Equal(t, base, Base(key))
		_, err = ParseEvent(string(key))
		require.ErrorIs(t, err, ErrResend)
	}
	_, _, ok := SplitVia("order-58213-shipped~resend-1")
	require.False(t, ok)

	_, err = Via(r, "bird")
	require.ErrorIs(t, err, ErrResend, "a fallback key is derived from the event key")
	_, err = Parse("order~via-sendy-shipped")
	require.ErrorIs(t, err, ErrResend, "'~' stays reserved")
	_, err = Via(Key(strings.Repeat("a", 235)), "sendy")
	require.ErrorIs(t, err, ErrTooLong)
}
