// Package docs holds the project's documents; its test keeps them and the
// README true to the repository: every link resolves, every folder is on
// the README's map, and the top level stays small enough to read.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// testOnly are the top-level folders that hold tests and nothing a
// program links.
var testOnly = map[string]bool{"integration": true, "simulation": true, "browsertest": true, "compose": true}

func topFolders(t *testing.T) []string {
	entries, err := os.ReadDir("..")
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestTheTopLevelShowsTheProduct(t *testing.T) {
	var product []string
	for _, f := range topFolders(t) {
		switch {
		case f == "cmd" || f == "internal" || f == "docs" || f == "deploy" || testOnly[f]:
		default:
			product = append(product, f)
		}
	}
	require.LessOrEqual(t, len(product), 14, "top-level folders besides cmd, internal, docs, deploy and the tests: %v; move plumbing under internal/ and tooling beside its command", product)
}

func TestTheReadmeMapsEveryFolder(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	text := string(readme)
	require.LessOrEqual(t, strings.Count(text, "\n"), 220, "the README is for a newcomer's first minutes: move detail to docs/")
	start := strings.Index(text, "## The repository")
	require.GreaterOrEqual(t, start, 0, "the README has a map of the repository")
	end := strings.Index(text[start+1:], "\n## ")
	repoMap := text[start : start+1+end]
	var folders []string
	for _, f := range topFolders(t) {
		folders = append(folders, f)
		for _, sub := range []string{"internal", "cmd"} {
			if f != sub {
				continue
			}
			entries, err := os.ReadDir(filepath.Join("..", sub))
			require.NoError(t, err)
			for _, e := range entries {
				if e.IsDir() {
					folders = append(folders, sub+"/"+e.Name())
				}
			}
		}
	}
	for _, f := range folders {
		name := filepath.Base(f)
		if strings.HasPrefix(f, "cmd/") {
			name = strings.TrimPrefix(f, "cmd/") // named as the command
		}
		require.True(t, strings.Contains(repoMap, "`"+name+"/`") || strings.Contains(repoMap, "`"+name+"`"),
			"the README's map does not name %s", f)
	}
}

var link = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)

// TestEveryLinkResolvesInsideTheRepository: the documents and the README
// point only at files of the repository, and each of them exists.
func TestEveryLinkResolvesInsideTheRepository(t *testing.T) {
	docs, err := filepath.Glob("*.md")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(docs), 6)
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	for _, f := range append(docs, "../README.md") {
		f, err := filepath.Abs(f)
		require.NoError(t, err)
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		text := string(b)
		require.NotContains(t, text, "../shared", "%s points outside the repository", f)
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			resolved := filepath.Join(filepath.Dir(f), target)
			rel, err := filepath.Rel(root, resolved)
			require.NoError(t, err)
			require.False(t, strings.HasPrefix(rel, ".."), "%s links %s, outside the repository", f, target)
			_, err = os.Stat(resolved)
			require.NoError(t, err, "%s links %s, which does not exist", f, target)
		}
	}
}
