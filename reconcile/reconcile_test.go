package reconcile

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/ledger"
	"github.com/acme/smsorch/provider"
)

// unlisted is a provider without a list endpoint that knows no message.
type unlisted struct {
	provider.Client
	gets []string
}

func (u *unlisted) Name() provider.Name { return provider.Sendy }

func (u *unlisted) Get(_ context.Context, id string) (provider.Message, error) {
	u.gets = append(u.gets, id)
	return provider.Message{}, provider.ErrNotFound
}

// Each message id is looked up once, also one the provider does not
// know: every lookup spends the provider's request budget.
func TestEachIDIsLookedUpOnce(t *testing.T) {
	ctx := context.Background()
	led, err := ledger.OpenSQLite(ctx, filepath.Join(t.TempDir(), "ledger.db"))
	require.NoError(t, err)
	defer func() { _ = led.Close() }()
	c := &unlisted{}
	out, err := Search(ctx, led, c, Query{EventKey: "order-1-shipped", Keys: []string{"order-1-shipped"}, KnownIDs: []string{"m-1", "m-2", "m-1"}, Now: time.Now()})
	require.NoError(t, err)
	require.Equal(t, []string{"m-1", "m-2"}, c.gets)
	require.Empty(t, out.Messages)
	require.Contains(t, out.How, "looked up 0 id(s) at sendy")
}
