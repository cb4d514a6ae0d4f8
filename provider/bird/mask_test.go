package bird

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// describe() puts Bird's own error message in the Reason verbatim (only
// wire.Snippet masks): a 4xx/5xx that names the recipient stores it in
// full in the ledger's attempts.reason (plain, not sealed, kept after the
// purge "for the audit"), the run's Reason and timeline, and so the
// intake's GET and smsctl status. The same holds for sendy.describe.
func TestProviderErrorMessagesAreMasked(t *testing.T) {
	t.Parallel()
	body := []byte(`{"code":"E0422","name":"InvalidRecipient","message":"recipient +31612345678 is not a mobile number"}`)
	for _, status := range []int{http.StatusBadRequest, http.StatusNotFound, http.StatusInternalServerError} {
		r := Classify(status, http.Header{}, body, time.Now())
		require.NotContains(t, r.Reason, "31612345678", "status %d: %s", status, r.Reason)
	}
}
