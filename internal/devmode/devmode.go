// Package devmode is the provider wiring that only dev mode reaches: the
// provider simulator started in the worker's process, and provider
// clients pointed at a simulator with its credentials. A worker outside
// --dev talks to the providers it is configured for and never calls it;
// smsctl calls it only for `audit --simulator`.
package devmode

import (
	"time"

	"go.uber.org/zap"

	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/internal/logging"
	"github.com/acme/smsorch/provider/bird"
	"github.com/acme/smsorch/provider/sendy"
)

// StartSimulator starts the simulator of both providers' APIs on addr,
// with the given faults installed.
func StartSimulator(cfg simulator.Config, faults []simulator.Fault, addr string, log *zap.Logger) (*simulator.Listening, simulator.Config, error) {
	cfg.Logger = log
	sim, err := simulator.New(cfg)
	if err != nil {
		return nil, cfg, err
	}
	for _, f := range faults {
		if err := sim.AddFault(f); err != nil {
			return nil, cfg, err
		}
	}
	l, err := sim.Listen(addr)
	return l, sim.Config(), err
}

// BirdConfig is a Bird client of the simulator at url: its dev workspace
// and channel, and accessKey ("" for the simulator's default).
func BirdConfig(url, accessKey string, timeout time.Duration) bird.Config {
	if accessKey == "" {
		accessKey = simulator.DefaultBirdAccessKey
	}
	return bird.Config{BaseURL: url, AccessKey: logging.Secret(accessKey), WorkspaceID: simulator.DevWorkspace, ChannelID: simulator.DevChannel, Timeout: timeout}
}

// SendyConfig is a Sendy client of the simulator at url with token (""
// for the simulator's default) and the default sender name.
func SendyConfig(url, token, sender string, timeout time.Duration) sendy.Config {
	if token == "" {
		token = simulator.DefaultSendyToken
	}
	return sendy.Config{BaseURL: url, Token: logging.Secret(token), Sender: sender, Timeout: timeout}
}
