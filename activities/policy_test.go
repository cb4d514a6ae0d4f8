package activities

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A hung request holds Bird's in-flight lock for up to its lifetime and
// outlives its client's attempt timeout, so it can take effect until
// both have passed: a late-effect horizon shorter than that would let the
// run stop looking for a second message while one can still appear.
func TestPolicyRefusesAHorizonBelowTheLockAndTheAttempt(t *testing.T) {
	t.Parallel()
	require.Equal(t, 30*time.Second, ProviderLockLifetime)
	for _, attempt := range []time.Duration{time.Second, 15 * time.Second, 40 * time.Second} {
		p := DefaultPolicy()
		p.AttemptTimeout = attempt
		floor := ProviderLockLifetime + attempt
		p.LateEffectHorizon = floor
		require.NoError(t, p.Validate(), "exactly the floor for a %s attempt", attempt)
		for _, short := range []time.Duration{floor - time.Millisecond, attempt, time.Second} {
			p.LateEffectHorizon = short
			err := p.Validate()
			require.Error(t, err, "horizon %s with a %s attempt", short, attempt)
			for _, says := range []string{
				"late-effect horizon " + short.String(),
				"at least " + floor.String(),
				"in-flight lock for up to 30s",
				"attempt timeout (" + attempt.String() + ")",
				"can take effect until then",
			} {
				require.ErrorContains(t, err, says)
			}
		}
	}
	require.NoError(t, DefaultPolicy().Validate(), "the default horizon (1m) covers 30 s + 15 s")
	require.GreaterOrEqual(t, DefaultPolicy().LateEffectHorizon, ProviderLockLifetime+DefaultPolicy().AttemptTimeout)
}
