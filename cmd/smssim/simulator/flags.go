package simulator

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// FaultFlag parses repeated --fault flags of the form kind=rate[@provider],
// for example "error_5xx=0.1@bird" or "drop_after_commit=0.05".
type FaultFlag []Fault

func (f *FaultFlag) String() string {
	parts := make([]string, len(*f))
	for i, x := range *f {
		parts[i] = fmt.Sprintf("%s=%g@%s", x.Kind, x.Rate, x.Provider)
	}
	return strings.Join(parts, ",")
}

// Set implements flag.Value.
func (f *FaultFlag) Set(v string) error {
	kind, rest, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("fault %q: write kind=rate[@provider], for example error_5xx=0.1@bird", v)
	}
	rateStr, prov, _ := strings.Cut(rest, "@")
	rate, err := strconv.ParseFloat(rateStr, 64)
	if err != nil {
		return fmt.Errorf("fault %q: rate %q is not a number from 0 to 1", v, rateStr)
	}
	fault := Fault{Kind: Kind(kind), Provider: prov, Rate: rate}
	if err := fault.Validate(); err != nil {
		return err
	}
	*f = append(*f, fault)
	return nil
}

// RegisterFlags binds the simulator's settings to flags with the given
// prefix ("" for the simulator's own command, "sim-" inside the worker).
func (c *Config) RegisterFlags(fs *flag.FlagSet, prefix string, faults *FaultFlag) {
	fs.StringVar(&c.BirdAccessKey, prefix+"bird-access-key", DefaultBirdAccessKey, "the access key the simulated Bird accepts")
	fs.StringVar(&c.SendyToken, prefix+"sendy-token", DefaultSendyToken, "the bearer token the simulated Sendy accepts")
	fs.DurationVar(&c.BirdRetention, prefix+"bird-retention", DefaultRetention, "how long simulated Bird keeps answers for replay")
	fs.DurationVar(&c.SendyRetention, prefix+"sendy-retention", DefaultRetention, "how long simulated Sendy keeps answers for replay")
	fs.DurationVar(&c.LockExpiry, prefix+"lock-expiry", DefaultLockExpiry, "how long simulated Bird's in-flight lock lives")
	fs.IntVar(&c.SendyRateLimit, prefix+"sendy-rate-limit", DefaultSendyRateLimit, "simulated Sendy's requests a minute (-1: no limit)")
	fs.DurationVar(&c.DeliveryDelay, prefix+"delivery-delay", DefaultDeliveryDelay, "time from acceptance to the final delivery status")
	fs.Float64Var(&c.FailRate, prefix+"fail-rate", 0, "share of messages that end failed")
	fs.Float64Var(&c.UndeliveredRate, prefix+"undelivered-rate", 0, "share of Sendy messages that end undelivered")
	fs.Uint64Var(&c.Seed, prefix+"seed", uint64(time.Now().UnixNano()), "seed of the fault and delivery rates")
	fs.Var(faults, prefix+"fault", "inject a fault by rate: kind=rate[@provider], repeatable (kinds: "+kindList()+")")
}

func kindList() string {
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}
