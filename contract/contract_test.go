package contract

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The UI's and the CLI's signal forms send JSON; "force" is read from it,
// and only a resend may carry it.
func TestParseSignalReadsForce(t *testing.T) {
	t.Parallel()
	d, err := ParseSignal(ActionResend, json.RawMessage(`{"reason":"customer called","by":"alice","force":true}`))
	require.NoError(t, err)
	require.Equal(t, Decision{Action: ActionResend, Reason: "customer called", By: "alice", Force: true}, d)

	d, err = ParseSignal(ActionResend, json.RawMessage(`{"reason":"r","by":"b"}`))
	require.NoError(t, err)
	require.False(t, d.Force)

	_, err = ParseSignal(ActionCancel, json.RawMessage(`{"reason":"r","by":"b","force":true}`))
	require.ErrorContains(t, err, `"force" applies to a resend only`)

	_, err = ParseSignal(ActionResend, json.RawMessage(`{"reason":"r","by":"b","force":"yes"}`))
	require.ErrorContains(t, err, `a resend may add "force": true`)
}

// A decision names its event and carries an id; the signal form reads both,
// and the binding check says what to add, with the run's key in it.
func TestDecisionBinding(t *testing.T) {
	t.Parallel()
	d, err := ParseSignal(ActionCancel, json.RawMessage(`{"reason":"r","by":"b","key":"order-1-shipped","id":"ticket-4711"}`))
	require.NoError(t, err)
	require.Equal(t, Decision{Action: ActionCancel, Reason: "r", By: "b", Key: "order-1-shipped", ID: "ticket-4711"}, d)
	require.NoError(t, d.CheckBinding("order-1-shipped"))

	require.ErrorContains(t, d.CheckBinding("order-2-shipped"), `the decision is for event "order-1-shipped", not for this run's "order-2-shipped"`)
	for _, bad := range []Decision{{Key: "order-1-shipped"}, {ID: "x"}, {}} {
		require.ErrorContains(t, bad.CheckBinding("order-1-shipped"), `add "key": "order-1-shipped", "id": "<unique to this decision`)
	}
	form := DecisionForm("order-1-shipped")
	var pasted Decision
	require.NoError(t, json.Unmarshal([]byte(form), &pasted), form)
	require.ErrorContains(t, pasted.CheckBinding("order-1-shipped"), "is the form's placeholder")
	for _, id := range []string{" padded", "x\xff", string(make([]byte, MaxDecisionID+1))} {
		bad := Decision{Key: "order-1-shipped", ID: id}
		require.ErrorContains(t, bad.CheckBinding("order-1-shipped"), "is not usable")
	}
}

// EntryKinds lists every EntryKind constant once, each a short
// kebab-case code, written in an entry's JSON.
func TestEntryKindsListEveryKind(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "contract.go", nil, 0)
	require.NoError(t, err)
	var declared []EntryKind
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); ok && id.Name == "EntryKind" {
				lit := v.Values[0].(*ast.BasicLit)
				declared = append(declared, EntryKind(strings.Trim(lit.Value, `"`)))
			}
		}
	}
	require.ElementsMatch(t, declared, EntryKinds)
	seen := map[EntryKind]bool{}
	for _, k := range EntryKinds {
		require.False(t, seen[k], "%s twice", k)
		seen[k] = true
		require.Regexp(t, `^[a-z]+(-[a-z]+)*$`, string(k))
		require.True(t, k.Known())
	}
	require.False(t, EntryKind("").Known())
	require.False(t, EntryKind("sent").Known())

	b, err := json.Marshal(Entry{Kind: KindAccepted, Text: "accepted as message m-1 on attempt 1"})
	require.NoError(t, err)
	require.Contains(t, string(b), `"kind":"accepted"`)
}

// docs/sending.md lists the kinds for the intake's and the query's users.
func TestTheDocsListEveryEntryKind(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docs/sending.md")
	require.NoError(t, err)
	for _, k := range EntryKinds {
		require.Contains(t, string(b), "`"+string(k)+"`", "docs/sending.md does not list the kind %s", k)
	}
}
