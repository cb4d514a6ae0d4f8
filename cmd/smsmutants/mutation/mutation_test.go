package mutation

import (
	"encoding/json"
	"errors"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// repoRoot is the repository this package lives in.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, "go.mod"))
	return root
}

// TestTheCataloguePlantsOnThisCheckout plants every mutant of the
// catalogue in a scratch directory: each says what it breaks, applies to
// today's code exactly (a patch that no longer fits is mended or
// dropped, never judged as a survivor), and changes what it names.
func TestTheCataloguePlantsOnThisCheckout(t *testing.T) {
	root := repoRoot(t)
	all, err := Load(filepath.Join(root, "simulation", "mutants"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(all), 30, "issue 34 asks for a catalogue of at least 30 mutants")
	scratch := t.TempDir()
	names := map[string]bool{}
	for _, m := range all {
		require.False(t, names[m.Name], "two mutants named %s", m.Name)
		names[m.Name] = true
		require.NotEmpty(t, m.Breaks, m.Name)
		overlay, err := Plant(root, scratch, m)
		require.NoError(t, err, m.Name)
		var o struct{ Replace map[string]string }
		b, err := os.ReadFile(overlay)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, &o))
		require.Len(t, o.Replace, len(m.Files), m.Name)
		for orig, planted := range o.Replace {
			before, err := os.ReadFile(orig)
			require.NoError(t, err)
			after, err := os.ReadFile(planted)
			require.NoError(t, err)
			require.NotEqual(t, string(before), string(after), "%s leaves %s as it is", m.Name, orig)
			if strings.HasSuffix(orig, ".go") {
				// A patch that breaks the syntax is a mutant nobody could
				// ship: it would be judged "not built", never scored.
				_, err := parser.ParseFile(token.NewFileSet(), planted, after, parser.AllErrors)
				require.NoError(t, err, "%s does not parse once planted", m.Name)
			}
		}
	}
}

// TestPlantNeverTouchesTheCheckout plants a mutant in a repository of
// one file: the planted copy changes, the original does not, and a
// patch that does not fit is refused with what to do.
func TestPlantNeverTouchesTheCheckout(t *testing.T) {
	repo := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "p"), 0o755))
	orig := filepath.Join(repo, "p", "a.go")
	require.NoError(t, os.WriteFile(orig, []byte("package p\n\nconst n = 1\n"), 0o644))
	patch := "breaks: n is two\n\ndiff --git a/p/a.go b/p/a.go\n--- a/p/a.go\n+++ b/p/a.go\n@@ -1,3 +1,3 @@\n package p\n \n-const n = 1\n+const n = 2\n"
	m, err := parse("n-is-two", []byte(patch))
	require.NoError(t, err)
	require.Equal(t, "n is two", m.Breaks)
	require.Equal(t, []string{"p/a.go"}, m.Files)

	overlay, err := Plant(repo, t.TempDir(), m)
	require.NoError(t, err)
	b, err := os.ReadFile(overlay)
	require.NoError(t, err)
	var o struct{ Replace map[string]string }
	require.NoError(t, json.Unmarshal(b, &o))
	planted, err := os.ReadFile(o.Replace[orig])
	require.NoError(t, err)
	require.Equal(t, "package p\n\nconst n = 2\n", string(planted))
	still, err := os.ReadFile(orig)
	require.NoError(t, err)
	require.Equal(t, "package p\n\nconst n = 1\n", string(still))

	require.NoError(t, os.WriteFile(orig, []byte("package p\n\nconst n = 3\n"), 0o644))
	_, err = Plant(repo, t.TempDir(), m)
	require.ErrorContains(t, err, "does not apply to this checkout (re-make its patch with git diff)")
}

func TestACatalogueEntryMustSayWhatItBreaks(t *testing.T) {
	_, err := parse("x", []byte("diff --git a/a.go b/a.go\n--- a/a.go\n+++ b/a.go\n"))
	require.ErrorContains(t, err, `no "breaks:" line`)
	_, err = parse("x", []byte("breaks: nothing\n"))
	require.ErrorContains(t, err, "no file changed")
	_, err = Load(t.TempDir())
	require.ErrorContains(t, err, "no mutant in")
}

// TestReadingTheSimulationsOutput reads go test's output as Judge does:
// the seeds that broke a promise, a build that failed (not a score), and
// a simulation that never printed its summary (killed: it crashed).
func TestReadingTheSimulationsOutput(t *testing.T) {
	m := Mutant{Name: "m"}
	killed := Outcome{Mutant: m}
	read(&killed, []byte(strings.Join([]string{
		"--- FAIL: TestSimulation (3.10s)",
		"    simulation_test.go:160: seed 1207 broke a promise: silent duplicate: 2 live messages",
		"    simulation_test.go:160: seed 1044 broke a promise: SmsState is \"Accepted\", but the run is Delivered",
		"    simulation_test.go:140: simulation: 2000 seeds from 1001 (2663 workflow runs) in 3.1s on 2 workers: 38000 lifetimes a minute, 2 failed",
		"FAIL",
	}, "\n")), errors.New("exit status 1"))
	require.NoError(t, killed.Err)
	require.True(t, killed.Killed)
	require.Empty(t, killed.Crashed)
	require.Equal(t, []int64{1044, 1207}, killed.Seeds)
	require.Equal(t, "silent duplicate: 2 live messages", killed.First)

	survived := Outcome{Mutant: m}
	read(&survived, []byte("    simulation_test.go:140: simulation: 2000 seeds from 1001 (2663 workflow runs) in 3.1s on 2 workers: 38000 lifetimes a minute, 0 failed\nok\n"), nil)
	require.False(t, survived.Killed)

	broken := Outcome{Mutant: m}
	read(&broken, []byte("# github.com/acme/smsorch/workflows\nworkflows/a.go:3:1: undefined: x\nFAIL\tgithub.com/acme/smsorch/simulation [build failed]\n"), errors.New("exit status 1"))
	require.ErrorContains(t, broken.Err, "does not build")
	require.False(t, broken.Killed)

	crashed := Outcome{Mutant: m}
	read(&crashed, []byte("panic: test timed out after 20m0s\nFAIL\tgithub.com/acme/smsorch/simulation\t1200.0s\n"), errors.New("exit status 1"))
	require.True(t, crashed.Killed)
	require.Contains(t, crashed.Crashed, "timed out")

	s := Tally([]Outcome{killed, survived, broken, crashed, {Mutant: Mutant{Name: "lucky"}, Killed: true, Seeds: []int64{7}}})
	require.Equal(t, 4, s.Judged)
	require.Equal(t, 3, s.Killed)
	require.Equal(t, []string{"lucky"}, s.Lucky)
	require.Equal(t, []string{"m"}, s.Survivors)
	require.Equal(t, []string{"m"}, s.Broken)
	require.InDelta(t, 75.0, s.Percent(), 0.001)
}
