// Package frontends lets a Temporal client reach a cluster through a list
// of frontend addresses: TEMPORAL_ADDRESS=10.0.0.1:7233,10.0.0.2:7233.
// The SDK balances calls over every address that answers (round robin),
// so a client keeps working when one frontend process dies. A single
// address is left to the SDK as it is (DNS names that resolve to several
// hosts already work that way).
package frontends

import (
	"fmt"
	"net"
	"strings"

	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"
)

// Scheme is the gRPC target scheme of an address list.
const Scheme = "smsorch-frontends"

// Parse splits a comma-separated list of host:port addresses. It refuses
// an empty entry or one without a port, naming it.
func Parse(list string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(list, ",") {
		a = strings.TrimSpace(a)
		if _, _, err := net.SplitHostPort(a); err != nil || a == "" {
			return nil, fmt.Errorf("Temporal address %q in %q is not host:port: write TEMPORAL_ADDRESS like 127.0.0.1:7233 or 10.0.0.1:7233,10.0.0.2:7233", a, list)
		}
		out = append(out, a)
	}
	return out, nil
}

// Apply makes opts dial every address of a comma-separated HostPort. It
// changes nothing for a single address.
func Apply(opts *client.Options) error {
	if !strings.Contains(opts.HostPort, ",") {
		return nil
	}
	addrs, err := Parse(opts.HostPort)
	if err != nil {
		return err
	}
	opts.HostPort = Scheme + ":///" + strings.Join(addrs, ",")
	if tls := opts.ConnectionOptions.TLS; tls != nil && tls.ServerName == "" {
		// The target is no host name now: verify the certificate against
		// the first address's host (set TEMPORAL_TLS_SERVER_NAME otherwise).
		tls.ServerName, _, _ = net.SplitHostPort(addrs[0])
	}
	opts.ConnectionOptions.DialOptions = append(opts.ConnectionOptions.DialOptions, grpc.WithResolvers(builder{}))
	return nil
}

// builder resolves smsorch-frontends:///a:1,b:2 to both addresses, once:
// the list is static, and gRPC reconnects to an address that comes back.
type builder struct{}

func (builder) Scheme() string { return Scheme }

func (builder) Build(target resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	addrs, err := Parse(strings.TrimPrefix(target.Endpoint(), "/"))
	if err != nil {
		return nil, err
	}
	state := resolver.State{}
	for _, a := range addrs {
		state.Addresses = append(state.Addresses, resolver.Address{Addr: a})
	}
	if err := cc.UpdateState(state); err != nil {
		return nil, err
	}
	return nop{}, nil
}

type nop struct{}

func (nop) ResolveNow(resolver.ResolveNowOptions) {}
func (nop) Close()                                {}
