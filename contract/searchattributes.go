package contract

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// Search attributes: the state, so the UI lists what needs a person with
// SmsState="AwaitingDecision"; the provider; and the event key.
var (
	StateAttribute    = temporal.NewSearchAttributeKeyKeyword("SmsState")
	ProviderAttribute = temporal.NewSearchAttributeKeyKeyword("SmsProvider")
	KeyAttribute      = temporal.NewSearchAttributeKeyKeyword("SmsKey")
)

// SearchAttributes are the custom search attributes to register in the namespace.
func SearchAttributes() map[string]enumspb.IndexedValueType {
	out := map[string]enumspb.IndexedValueType{}
	for _, k := range []temporal.SearchAttributeKey{StateAttribute, ProviderAttribute, KeyAttribute} {
		out[k.GetName()] = k.GetValueType()
	}
	return out
}

// EnsureSearchAttributes registers the attributes a namespace lacks: the
// worker runs it with SearchAttributes() against an existing cluster, the
// dev server on its own namespace. An attribute that exists with another
// type is an error, and when the caller may not add attributes the error
// gives the temporal commands that do. (It was devstack's; it moved here
// so that production code need not link the dev server for it.)
func EnsureSearchAttributes(ctx context.Context, c client.Client, ns string, attrs map[string]enumspb.IndexedValueType) error {
	if len(attrs) == 0 {
		return nil
	}
	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
	if err != nil {
		return fmt.Errorf("list the search attributes of namespace %s: %w", ns, err)
	}
	names := make([]string, 0, len(attrs))
	for name := range attrs {
		names = append(names, name)
	}
	sort.Strings(names)
	missing := map[string]enumspb.IndexedValueType{}
	var cmds []string
	for _, name := range names {
		typ := attrs[name]
		got, ok := have.GetCustomAttributes()[name]
		switch {
		case !ok:
			missing[name] = typ
			cmds = append(cmds, fmt.Sprintf("temporal operator search-attribute create --namespace %s --name %s --type %s", ns, name, typ))
		case got != typ:
			return fmt.Errorf("search attribute %s exists in namespace %s as %s, but this program needs %s: remove it, or use a fresh namespace (in dev mode, a fresh data directory)",
				name, ns, got, typ)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: ns, SearchAttributes: missing})
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("namespace %s lacks search attributes and they could not be added (%w): run\n  %s", ns, err, strings.Join(cmds, "\n  "))
	}
	return nil
}

// RegisterSearchAttributes registers this contract's search attributes
// (SearchAttributes) in namespace ns where they are missing.
func RegisterSearchAttributes(ctx context.Context, c client.Client, ns string) error {
	return EnsureSearchAttributes(ctx, c, ns, SearchAttributes())
}
