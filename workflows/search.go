package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/acme/smsorch/contract"
)

func (r *run) setState(s contract.State) {
	if r.st.State == s {
		return
	}
	r.st.State = s
	r.upsertSearch()
	r.log.Info("sms state", "key", r.in.Key, "state", string(s))
	r.publish()
}

func (r *run) upsertSearch() {
	if r.searchUpToDate() {
		return
	}
	_ = workflow.UpsertTypedSearchAttributes(r.ctx,
		contract.StateAttribute.ValueSet(string(r.st.State)),
		contract.ProviderAttribute.ValueSet(r.st.Provider),
		contract.KeyAttribute.ValueSet(r.in.Key),
	)
}

// searchUpToDate reports whether the run's search attributes (as the
// start set them, or the last upsert) already hold its state, provider
// and key: an upsert would only add an event.
func (r *run) searchUpToDate() bool {
	sa := workflow.GetTypedSearchAttributes(r.ctx)
	for _, kv := range []struct {
		key  temporal.SearchAttributeKeyKeyword
		want string
	}{{contract.StateAttribute, string(r.st.State)}, {contract.ProviderAttribute, r.st.Provider}, {contract.KeyAttribute, r.in.Key}} {
		if got, ok := sa.GetKeyword(kv.key); !ok || got != kv.want {
			return false
		}
	}
	return true
}
