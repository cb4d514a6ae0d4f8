package devstack

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
)

func (s *Stack) waitUI(ctx context.Context) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case err := <-s.uiDone:
			s.uiDone <- err // Stop reads it again
			return fmt.Errorf("the web UI on %s stopped at start: %w", s.uiAddr, err)
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.UIURL()+"/", nil)
		if resp, err := hc.Do(req); err == nil {
			_ = resp.Body.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the web UI on %s does not answer: %w", s.uiAddr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// buildUI makes the Temporal web UI of the stack, pointed at its
// frontend and the codec endpoint, on the UI address.
func (s *Stack) buildUI() error {
	uiHost, uiPort, err := resolvePort(s.cfg.UIAddress)
	if err != nil {
		return fmt.Errorf("UI address %s: %w", s.cfg.UIAddress, err)
	}
	s.uiAddr = net.JoinHostPort(uiHost, strconv.Itoa(uiPort))
	s.ui = uiserver.NewServer(uiserveroptions.WithConfigProvider(&uiconfig.Config{
		Host:                uiHost,
		Port:                uiPort,
		TemporalGRPCAddress: s.frontendAddr,
		EnableUI:            true,
		DefaultNamespace:    s.cfg.Namespace,
		CORS:                uiconfig.CORS{CookieInsecure: true},
		HideLogs:            true,
		DisableNewsFetch:    true, // the machines this runs on may have no internet
		Codec:               uiconfig.Codec{Endpoint: s.cfg.CodecEndpoint},
	}))
	return nil
}
