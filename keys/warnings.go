package keys

import (
	"fmt"
	"strconv"
	"time"
)

// Warning is a property of a valid key that suggests it will not protect
// anything. Keys with warnings are still accepted; callers show them.
type Warning struct {
	// Code is stable for programs: "timestamp".
	Code string
	// Message explains the risk and the fix.
	Message string
}

func (w Warning) String() string { return w.Message }

// WarnTimestamp is the Code of a key that carries a fresh time.
const WarnTimestamp = "timestamp"

// Warnings inspects a key for fresh timestamps: a run of exactly 10 digits
// (Unix seconds) or 13 digits (Unix milliseconds) that reads as a time within
// the year before now (or the day after it, for clock skew). A key made from
// the clock changes on every attempt, so each retry looks like a new message
// to the provider and is sent again.
func Warnings(k Key, now time.Time) []Warning {
	var out []Warning
	for _, loc := range digitRunRE.FindAllStringIndex(string(k), -1) {
		run := string(k)[loc[0]:loc[1]]
		var t time.Time
		switch len(run) {
		case 10:
			sec, _ := strconv.ParseInt(run, 10, 64)
			t = time.Unix(sec, 0)
		case 13:
			ms, _ := strconv.ParseInt(run, 10, 64)
			t = time.UnixMilli(ms)
		default:
			continue
		}
		if t.Before(now.AddDate(-1, 0, 0)) || t.After(now.Add(24*time.Hour)) {
			continue
		}
		out = append(out, Warning{Code: WarnTimestamp, Message: fmt.Sprintf(
			"sms key %q contains %s, which reads as the time %s: a key taken from the clock changes on every attempt, "+
				"so the provider treats each retry as a new message and sends it again; derive the key from the event "+
				"(an order id and stage, an OTP attempt id stored with the attempt)",
			string(k), run, t.UTC().Format(time.RFC3339))})
	}
	return out
}
