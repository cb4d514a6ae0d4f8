package bird

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Bird's own error message goes into the Reason masked: a 4xx/5xx that
// names the recipient would otherwise store it in full in the ledger's
// attempts.reason (not sealed, kept after the purge for the audit), the
// run's Reason and timeline, and so the intake's GET and smsctl status.
// sendy.describe masks the same way.
func TestProviderErrorMessagesAreMasked(t *testing.T) {
	t.Parallel()
	body := []byte(`{"code":"E0422","name":"InvalidRecipient","message":"recipient +31612345678 is not a mobile number"}`)
	for _, status := range []int{http.StatusBadRequest, http.StatusNotFound, http.StatusInternalServerError} {
		r := Classify(status, http.Header{}, body, time.Now())
		require.NotContains(t, r.Reason, "31612345678", "status %d: %s", status, r.Reason)
	}
}
