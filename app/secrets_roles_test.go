package app

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/codec"
)

// The codec server runs in the --ui-only process (compose's temporal-ui,
// --codec-server=0.0.0.0:8234): a short or example SMSORCH_CODEC_TOKEN,
// and the published example codec key, are refused there too, where they
// guard the decrypted payloads.
func TestTheUIOnlyCodecServerRefusesAWeakToken(t *testing.T) {
	t.Parallel()
	own, err := codec.ParseKeys(mustKey(t))
	require.NoError(t, err)
	cfg := Config{UIOnly: true, UIAddress: "0.0.0.0:8233", UIFrontend: "temporal:7233",
		CodecServerAddress: "0.0.0.0:8234", CodecServerInContainer: true, Codec: own, CodecToken: "t0ken"}
	require.ErrorContains(t, cfg.WithDefaults().Validate(), "SMSORCH_CODEC_TOKEN is 5 bytes")
	cfg.CodecToken = "codec-token"
	require.ErrorContains(t, cfg.WithDefaults().Validate(), "published example")
}

// .env.example once shipped POSTGRES_PASSWORD=change-me: a ledger
// address with it is refused like any value the project published.
func TestTheLedgerDSNWithThePublishedPasswordIsRefused(t *testing.T) {
	t.Parallel()
	own, err := codec.ParseKeys(mustKey(t))
	require.NoError(t, err)
	cfg := Config{Bird: BirdConfig{BaseURL: "https://api.bird.com", AccessKey: "a-real-looking-bird-key"}, Codec: own,
		IntakeSecret: intakeSecret, LedgerPath: "postgres://smsorch:change-me@db:5432/smsorch"}
	require.ErrorContains(t, cfg.WithDefaults().Validate(), "published example")
}
