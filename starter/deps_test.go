package starter_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// deps lists the packages pkg links, through the go command.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
	require.NoError(t, err, "go list -deps %s: %s", pkg, out)
	return strings.Fields(string(out))
}

// An application that starts SMS links the contract and the checks, not
// the worker: no ledger, activities, SQL driver, workflow code, dev server
// or simulator.
func TestStarterLinksNoWorkerInternals(t *testing.T) {
	t.Parallel()
	const mod = "github.com/acme/smsorch/"
	forbidden := []string{mod + "ledger", mod + "activities", mod + "workflows", mod + "reconcile",
		mod + "internal/devstack", mod + "internal/devmode", mod + "internal/logging", mod + "internal/metrics",
		mod + "internal/clientopts", mod + "internal/tracing", mod + "cmd/", mod + "app",
		"sqlite", "pgx", "go.temporal.io/server", "go.uber.org/zap", "go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters"}
	for _, d := range deps(t, mod+"starter") {
		for _, f := range forbidden {
			require.False(t, strings.HasPrefix(d, f) || (!strings.Contains(f, "/") && strings.Contains(d, f)),
				"starter links %s", d)
		}
	}
}

// The contract imports nothing of this module but keys.
func TestContractImportsOnlyKeys(t *testing.T) {
	t.Parallel()
	var ours []string
	for _, d := range deps(t, "github.com/acme/smsorch/contract") {
		if strings.HasPrefix(d, "github.com/acme/smsorch/") {
			ours = append(ours, d)
		}
	}
	require.ElementsMatch(t, []string{"github.com/acme/smsorch/keys", "github.com/acme/smsorch/contract"}, ours)
}
