package cli

import (
	"bytes"
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/cmd/smssim/simulator"
	"github.com/acme/smsorch/codec"
	"github.com/acme/smsorch/ledger"
)

// The ledger keeps the recipient and the text sealed; `smsctl audit`
// prints them masked, in full only with --reveal and the keys, and
// without the keys as sealed.
func TestAuditMasksUnlessRevealedByAKeyHolder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keySpec, err := codec.NewKey("k1")
	require.NoError(t, err)
	ring, err := codec.ParseKeys(keySpec)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "ledger.db")
	led, err := ledger.OpenSQLite(ctx, path, ledger.WithKeys(ring))
	require.NoError(t, err)
	_, err = led.Claim(ctx, ledger.Event{Key: "otp-7-1", Provider: "sendy", Recipient: "+31612345678", Text: "Your code is 482913",
		Fingerprint: "f", WorkflowID: "otp-7-1", RunID: "r", CreatedAt: time.Now()})
	require.NoError(t, err)
	require.NoError(t, led.Close())
	sim, err := simulator.New(simulator.Config{})
	require.NoError(t, err)
	srv := httptest.NewServer(sim.Handler())
	defer srv.Close()

	audit := func(env []string, extra ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := Run(ctx, append([]string{"audit", "otp-7-1", "--ledger", path, "--simulator", srv.URL}, extra...), &out, &errOut, env)
		return code, out.String(), errOut.String()
	}
	withKeys := []string{codec.EnvKeys + "=" + keySpec}
	for _, extra := range [][]string{nil, {"--json"}} {
		code, out, errOut := audit(withKeys, extra...)
		require.Equal(t, ExitOK, code, errOut)
		require.Contains(t, out, "+31…78")
		require.NotContains(t, out, "31612345678")
		require.NotContains(t, out, "482913")
		require.Contains(t, out, "(19 characters: --reveal shows the text)")
	}
	code, out, errOut := audit(withKeys, "--reveal")
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "+31612345678")
	require.Contains(t, out, "Your code is 482913")

	code, out, errOut = audit(nil)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "(sealed)", "without the keys")
	require.NotContains(t, out, "482913")
	code, _, errOut = audit(nil, "--reveal")
	require.Equal(t, ExitInvalid, code)
	require.Contains(t, errOut, "give the payload keys")
}
