package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
)

// TestVersionsRetireWholly holds versions.go's rule: every version from
// the supported minimum to the latest has recorded histories, and none
// below the minimum keeps a branch (a since() that is always true) or a
// history; a GetVersion call names changeID from the supported minimum
// to the latest, and a history's version markers name changeID at a
// version the code knows. It reads the package's source, so a branch
// written another way (r.v >= …) fails too.
func TestVersionsRetireWholly(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	declared := map[string]workflow.Version{}
	used := map[string][]string{} // version constant -> where since() names it
	getVersionMin, getVersionCalls := "", 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		var inSince *ast.FuncDecl
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				if n.Name.Name == "since" { // the one place that compares
					inSince = n
				}
			case *ast.ValueSpec:
				for i, name := range n.Names {
					if lit, ok := valueAt(n, i).(*ast.BasicLit); ok && strings.HasPrefix(name.Name, "version") {
						v, err := strconv.Atoi(lit.Value)
						require.NoError(t, err)
						declared[name.Name] = workflow.Version(v)
					}
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				switch sel.Sel.Name {
				case "since":
					require.Len(t, n.Args, 1)
					id, ok := n.Args[0].(*ast.Ident)
					require.True(t, ok, "%s: since() takes a version constant", fset.Position(n.Pos()))
					used[id.Name] = append(used[id.Name], fset.Position(n.Pos()).String())
				case "GetVersion":
					require.Len(t, n.Args, 4)
					getVersionCalls++
					id, ok := n.Args[1].(*ast.Ident)
					require.True(t, ok && id.Name == "changeID", "%s: GetVersion names changeID", fset.Position(n.Pos()))
					if id, ok := n.Args[2].(*ast.Ident); ok {
						getVersionMin = id.Name
					} else if s, ok := n.Args[2].(*ast.SelectorExpr); ok {
						getVersionMin = s.Sel.Name
					}
				}
			case *ast.BinaryExpr:
				if inSince != nil && n.Pos() >= inSince.Pos() && n.End() <= inSince.End() {
					return true
				}
				for _, side := range []ast.Expr{n.X, n.Y} { // r.v >= x and x <= r.v alike
					if sel, ok := side.(*ast.SelectorExpr); ok && sel.Sel.Name == "v" {
						if x, ok := sel.X.(*ast.Ident); ok && x.Name == "r" {
							t.Errorf("%s: compare versions with r.since(version…), which this test can follow", fset.Position(n.Pos()))
						}
					}
				}
			}
			return true
		})
	}
	require.LessOrEqual(t, getVersionCalls, 1, "SendSMS reads its version in one place, since()")
	if len(declared) > 0 || getVersionCalls > 0 {
		require.Equal(t, "minSupportedVersion", getVersionMin, "GetVersion's minimum is minSupportedVersion")
		require.NotEmpty(t, declared, "GetVersion without a version constant")
	}
	for name := range used {
		_, ok := declared[name]
		require.True(t, ok, "since(%s): not a version of versions.go", name)
	}

	histories, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	require.NoError(t, err)
	byVersion := map[workflow.Version][]string{}
	prefix := regexp.MustCompile(`^v(\d+)-`)
	for _, h := range histories {
		v := workflow.DefaultVersion // recorded before the first change
		if m := prefix.FindStringSubmatch(filepath.Base(h)); m != nil {
			n, _ := strconv.Atoi(m[1])
			v = workflow.Version(n)
		}
		byVersion[v] = append(byVersion[v], filepath.Base(h))
		for _, m := range versionMarkers(t, h) {
			require.Equal(t, changeID, m.change, "%s: a version marker of change %q, which SendSMS no longer reads: a history from before 1.0.0?", h, m.change)
			require.Equal(t, v, m.version, "%s: its name says version %d, its marker %d", h, v, m.version)
		}
	}

	for v, hs := range byVersion {
		require.GreaterOrEqual(t, v, minSupportedVersion, "histories of version %d, below the supported minimum %d, must go: %v", v, minSupportedVersion, hs)
		require.LessOrEqual(t, v, latestVersion, "histories of version %d, past the latest %d: %v", v, latestVersion, hs)
	}
	for name, v := range declared {
		if v <= minSupportedVersion {
			require.Empty(t, used[name], "%s (%d) is at or below the supported minimum %d: its since() is always true; delete the branch", name, v, minSupportedVersion)
		}
		if v < minSupportedVersion {
			continue // retired: its histories must be gone (above)
		}
		require.NotEmpty(t, byVersion[v], "%s (%d) has no recorded history in testdata: record one (SMSORCH_RECORD_HISTORY=1 go test ./integration -run TestRecordHistories)", name, v)
	}
	if minSupportedVersion == workflow.DefaultVersion {
		require.NotEmpty(t, byVersion[workflow.DefaultVersion], "runs from before the first change are supported: keep their histories")
	}
}

type versionMarker struct {
	change  string
	version workflow.Version
}

// versionMarkers reads the GetVersion markers of a recorded history.
func versionMarkers(t *testing.T, path string) []versionMarker {
	fh, err := os.Open(path)
	require.NoError(t, err)
	defer func() { _ = fh.Close() }()
	h, err := client.HistoryFromJSON(fh, client.HistoryJSONOptions{})
	require.NoError(t, err)
	var out []versionMarker
	for _, e := range h.GetEvents() {
		m := e.GetMarkerRecordedEventAttributes()
		if m == nil || m.GetMarkerName() != "Version" {
			continue
		}
		var vm versionMarker
		dc := converter.GetDefaultDataConverter()
		require.NoError(t, dc.FromPayloads(m.GetDetails()["change-id"], &vm.change))
		require.NoError(t, dc.FromPayloads(m.GetDetails()["version"], &vm.version))
		out = append(out, vm)
	}
	return out
}

func valueAt(s *ast.ValueSpec, i int) ast.Expr {
	if i < len(s.Values) {
		return s.Values[i]
	}
	return nil
}
