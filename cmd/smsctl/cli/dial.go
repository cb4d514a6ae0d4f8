package cli

import (
	"context"
	"fmt"
	"strings"

	"go.temporal.io/sdk/client"

	"github.com/acme/smsorch/codec"
	"github.com/acme/smsorch/internal/clientopts"
	"github.com/acme/smsorch/starter"
)

// devFrontend is the dev stack's frontend (devstack.DefaultFrontendAddress,
// not imported: that package carries the whole Temporal server).
const devFrontend = "127.0.0.1:7233"

// envLookup is the environment in os.Environ form. The SDK's envconfig
// needs both lookups and the whole list (TEMPORAL_GRPC_META_* headers).
type envLookup []string

func (e envLookup) LookupEnv(k string) (v string, ok bool) {
	for _, kv := range e {
		if name, val, found := strings.Cut(kv, "="); found && name == k {
			v, ok = val, true // the last one wins, as in a shell
		}
	}
	return v, ok
}

func (e envLookup) Environ() []string { return e }

func (c *cmd) getenv(k string) string {
	v, _ := c.env.LookupEnv(k)
	return v
}

// withStarter dials Temporal the way the temporal CLI does, runs f with a
// Starter over the connection, and closes it.
func (c *cmd) withStarter(ctx context.Context, f func(*starter.Starter) error) error {
	s, closeFn, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	return f(s)
}

func (c *cmd) dial(ctx context.Context) (*starter.Starter, func(), error) {
	keys, err := codec.FromEnv(c.getenv)
	if err != nil {
		return nil, nil, err
	}
	opts, err := clientopts.Build(clientopts.Settings{
		Env: c.env, Address: c.address, DefaultAddress: devFrontend, Namespace: c.ns, Codec: keys,
	})
	if err != nil {
		return nil, nil, err
	}
	tc, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to Temporal at %s: %w (is `go run ./worker --dev` running? set TEMPORAL_ADDRESS for another cluster, and for one with mutual TLS TEMPORAL_TLS_CLIENT_CERT_PATH, TEMPORAL_TLS_CLIENT_KEY_PATH and TEMPORAL_TLS_SERVER_CA_CERT_PATH)", opts.HostPort, err)
	}
	return starter.New(tc, starter.WithNamespace(opts.Namespace)), tc.Close, nil
}
