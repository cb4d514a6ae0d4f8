package sms

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/nyaruka/phonenumbers"

	"github.com/acme/smsorch/keys"
	"github.com/acme/smsorch/provider"
)

// Event is one SMS as a run carries it: the event key, the provider, the
// recipient as given, the sender name and the text.
type Event struct {
	Key      keys.Key
	Provider string
	To       string
	From     string
	Text     string
	// Fallback is the provider the event may move to; "" for none.
	Fallback string
}

// Checked is an event that passed Check.
type Checked struct {
	Provider provider.Name
	To       Recipient
	// Fallback is the provider the event may move to; "" for none.
	Fallback provider.Name
	// From is the sender name without surrounding spaces.
	From string
	Text Text
	// Warnings are accepted but worth a look: a number outside the known
	// ranges, a timestamp in the key.
	Warnings []string
}

// FieldError says which field of an event is wrong ("to", "key", "text",
// "provider" or "from") and why.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Err.Error() }

// Unwrap exposes the cause (a keys.Error, an sms.Error).
func (e *FieldError) Unwrap() error { return e.Err }

// Check is the one check of an event before anything is started or sent,
// run by the starter before a run starts and by the run's Prepare step
// before the first attempt: the recipient (E.164, through
// libphonenumber) and that the key neither is it nor contains it in any
// usual written form, the text (not empty, at most MaxSegments
// segments), the provider, and the sender rule (Bird sends from the
// channel's own sender), all of them for the fallback provider too. now
// is for the key's timestamp warning.
func Check(e Event, now time.Time) (Checked, error) {
	var c Checked
	to, err := ParseRecipient(e.To)
	if err != nil {
		return c, &FieldError{"to", err}
	}
	if err := keys.CheckRecipient(e.Key, to.E164); err != nil {
		return c, &FieldError{"key", err}
	}
	if err := checkKeyCarriesNoNumber(e.Key, to.E164); err != nil {
		return c, &FieldError{"key", err}
	}
	text, err := InspectText(e.Text)
	if err != nil {
		return c, &FieldError{"text", err}
	}
	prov, err := provider.ParseName(e.Provider)
	if err != nil {
		return c, &FieldError{"provider", err}
	}
	if prov == provider.Bird && e.From != "" {
		return c, &FieldError{"from", fmt.Errorf("Bird sends from the channel's own sender; leave the sender empty (it was %q)", e.From)}
	}
	var fallback provider.Name
	if e.Fallback != "" {
		if fallback, err = provider.ParseName(e.Fallback); err != nil {
			return c, &FieldError{"fallback", err}
		}
		switch {
		case fallback == prov:
			return c, &FieldError{"fallback", fmt.Errorf("the fallback provider is the provider itself (%s): name the other one, or none", prov)}
		case fallback == provider.Bird && e.From != "":
			return c, &FieldError{"fallback", fmt.Errorf("Bird sends from the channel's own sender, so the sender %q could not be kept on a failover to Bird; leave the sender empty or choose no fallback", e.From)}
		}
		if _, err := keys.Via(e.Key, string(fallback)); err != nil {
			return c, &FieldError{"key", err}
		}
	}
	c = Checked{Provider: prov, Fallback: fallback, To: to, From: strings.TrimSpace(e.From), Text: text}
	if to.Warning != "" {
		c.Warnings = append(c.Warnings, to.Warning)
	}
	for _, w := range keys.Warnings(e.Key, now) {
		c.Warnings = append(c.Warnings, w.Message)
	}
	return c, nil
}

// checkKeyCarriesNoNumber refuses a key that holds the recipient's number
// as a run of digits, written any usual way. keys.CheckRecipient refuses
// a key that is nothing but the number, because it names the person; a
// key that merely contains it (otp-31612345678-1) names one message, but
// the key is the SMS's Idempotency-Key and its run's workflow id, which
// Temporal shows in its UI, search attributes and logs, unencrypted, and
// which the provider keeps in its records: the number would spread to
// every place the payload codec and the masking of our logs keep it from.
func checkKeyCarriesNoNumber(k keys.Key, e164 string) error {
	forms := numberForms(e164)
	for _, at := range digitRun.FindAllStringIndex(string(k), -1) {
		run := string(k)[at[0]:at[1]]
		if !forms[run] {
			continue
		}
		// The error reaches logs and answers: it shows the key masked.
		masked := string(k)[:at[0]] + maskLoose(run) + string(k)[at[1]:]
		return &keys.Error{Input: masked, Part: "key", Kind: keys.ErrRecipient,
			Problem: fmt.Sprintf("contains the recipient's number (as %s): the key is the SMS's Idempotency-Key and its workflow id, "+
				"so it shows in Temporal's UI, search attributes and logs and in the provider's records, where the number must not be", maskLoose(run)),
			Fix: `derive it from the business event instead, never from the recipient: for example otp-<user-id>-<n> (keys.OTP) or order-<order-id>-shipped (keys.Event)`}
	}
	return nil
}

var digitRun = regexp.MustCompile(`[0-9]+`)

// numberForms are the digit strings a number is usually written as: its
// E.164 digits (31612345678), with the international prefix 00
// (0031612345678), its national significant number (612345678) and its
// national form with the trunk prefix (0612345678). Forms shorter than
// seven digits are left out: so short a run is as likely an entity's id.
func numberForms(e164 string) map[string]bool {
	num, err := phonenumbers.Parse(e164, "")
	if err != nil {
		return nil
	}
	digits := strings.TrimPrefix(e164, "+")
	nsn := phonenumbers.GetNationalSignificantNumber(num)
	region := phonenumbers.GetRegionCodeForCountryCode(int(num.GetCountryCode()))
	forms := map[string]bool{}
	for _, f := range []string{
		digits, "00" + digits, nsn,
		phonenumbers.GetNddPrefixForRegion(region, true) + nsn,
		phonenumbers.NormalizeDigitsOnly(phonenumbers.Format(num, phonenumbers.NATIONAL)),
	} {
		if len(f) >= 7 {
			forms[f] = true
		}
	}
	return forms
}
