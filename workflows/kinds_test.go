package workflows

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/smsorch/activities"
	"github.com/acme/smsorch/contract"
	"github.com/acme/smsorch/provider"
)

// A signal that does not fit the run's state is refused in an entry of
// kind decision-refused, and nothing is recorded as decided.
func TestARefusedSignalIsOfKindDecisionRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.prepared()
	h.acceptsAs("m-1")
	h.statuses(provider.StatusSent, provider.StatusDelivered)
	h.signal(5*time.Second, contract.SignalResend, map[string]string{"reason": "double click", "by": "erin"})
	h.run()
	s := h.query()
	var refusals []contract.Entry
	for _, e := range s.Timeline {
		if e.Kind == contract.KindDecisionRefused {
			refusals = append(refusals, e)
		}
	}
	require.Len(t, refusals, 1, "%s", timelineTexts(s))
	require.Contains(t, refusals[0].Text, "refused a resend signal from erin")
	require.False(t, timelineHasKind(s, contract.KindDecided), "a refused signal decides nothing")
	require.Equal(t, contract.Delivered, s.State)
}

// Every entry of a run's timeline carries a kind of the closed set
// contract.EntryKinds, on the typical paths of a run: delivered,
// rejected, unknown and found, unknown and not found until the deadline,
// a resend, a failover, a search that fails, a refused signal. The
// harness's query checks the kinds of every run a test queries; this
// test checks these paths by name, and that each shows the kinds it is
// about.
func TestEveryTimelineEntryHasAKindOfTheClosedSet(t *testing.T) {
	t.Parallel()
	unknown := func(h *harness) {
		h.prepared()
		h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
			return activities.SendOutput{}, failAttempt(provider.Unknown, attempt)
		})
	}
	paths := map[string]struct {
		run  func(h *harness)
		want []contract.EntryKind
	}{
		"delivered": {
			run: func(h *harness) {
				h.prepared()
				h.acceptsAs("m-1")
				h.statuses(provider.StatusSent, provider.StatusDelivered)
				h.run()
			},
			want: []contract.EntryKind{contract.KindSending, contract.KindAccepted, contract.KindStatus},
		},
		"rejected": {
			run: func(h *harness) {
				h.prepared()
				h.sendWith(func(attempt int32, _ activities.SendInput) (activities.SendOutput, error) {
					return activities.SendOutput{}, failAttempt(provider.Rejected, attempt)
				})
				h.run()
			},
			want: []contract.EntryKind{contract.KindSending, contract.KindRejected},
		},
		"unknown, then found": {
			run:  func(h *harness) { h.unknownThenFound() },
			want: []contract.EntryKind{contract.KindSendUnknown, contract.KindSearched, contract.KindFound, contract.KindStatus},
		},
		"unknown, not found, no decision": {
			run: func(h *harness) {
				unknown(h)
				h.reconcileReturns(activities.ReconcileOutput{Searched: true})
				h.run()
			},
			want: []contract.EntryKind{contract.KindSendUnknown, contract.KindSearched, contract.KindNotFound, contract.KindAwaitingDecision, contract.KindEnded},
		},
		"resend decided": {
			run: func(h *harness) {
				h.awaitsAfterTheWindow()
				h.signal(5*time.Hour, contract.SignalResend, map[string]string{"reason": "customer says nothing arrived", "by": "alice"})
				h.env.RegisterDelayedCallback(func() {
					h.env.SignalWorkflow(contract.SignalCancel, map[string]string{"reason": "enough", "by": "bob", "key": key, "id": nextDecisionID()})
				}, 10*time.Hour)
				h.run()
			},
			want: []contract.EntryKind{contract.KindAwaitingDecision, contract.KindDecided, contract.KindSending},
		},
		"failover": {
			run:  func(h *harness) { h.uncertainThenMovedToSendy() },
			want: []contract.EntryKind{contract.KindNotFound, contract.KindMoved, contract.KindAccepted, contract.KindSearched},
		},
		"search fails, then a cancel": {
			run: func(h *harness) {
				unknown(h)
				h.searchesFail(errors.New("bird: 503 service unavailable"))
				h.signal(5*time.Hour, contract.SignalResend, map[string]string{"reason": "customer says nothing arrived", "by": "alice"})
				h.signal(6*time.Hour, contract.SignalCancel, map[string]string{"reason": "order cancelled", "by": "dave"})
				h.run()
			},
			want: []contract.EntryKind{contract.KindSearchFailed, contract.KindAwaitingDecision, contract.KindDecided, contract.KindResendHeld},
		},
		"refused signals": {
			run: func(h *harness) {
				h.prepared()
				h.acceptsAs("m-1")
				h.statuses(provider.StatusSent, provider.StatusSent, provider.StatusDelivered)
				h.signal(5*time.Second, contract.SignalResend, map[string]string{"reason": "double click", "by": "erin"})
				h.signal(6*time.Second, contract.SignalCancel, "not an object")
				h.run()
			},
			want: []contract.EntryKind{contract.KindDecisionRefused},
		},
	}
	for name, p := range paths {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			p.run(h)
			s := h.query()
			require.NotEmpty(t, s.Timeline)
			require.Empty(t, unknownKinds(s), "entries without a kind of contract.EntryKinds")
			for _, k := range p.want {
				require.True(t, timelineHasKind(s, k), "no entry of kind %s in:\n%s", k, timelineTexts(s))
			}
		})
	}
}

// The check the harness makes of every timeline finds an entry without
// a kind and one of a kind outside the set.
func TestUnknownKindsFindsEntriesOutsideTheSet(t *testing.T) {
	t.Parallel()
	s := contract.Status{Timeline: []contract.Entry{
		{Kind: contract.KindSending, Text: "sending with key k"},
		{Text: "no kind"},
		{Kind: "sent", Text: "a kind outside the set"},
	}}
	bad := unknownKinds(s)
	require.Len(t, bad, 2)
	require.Equal(t, "no kind", bad[0].Text)
	require.Equal(t, "a kind outside the set", bad[1].Text)
	for _, k := range contract.EntryKinds {
		require.True(t, k.Known(), k)
	}
}

// Every note the workflow makes names its kind as a constant of
// contract.EntryKinds (or, where the kind depends on a branch, a
// variable each branch sets): a path no test runs cannot add an entry
// without a kind, or with one outside the set.
func TestEveryNoteNamesAKind(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	known := map[string]bool{}
	for _, k := range contract.EntryKinds {
		known[string(k)] = true
	}
	// The constants' names, read from the contract.
	fset := token.NewFileSet()
	cf, err := parser.ParseFile(fset, filepath.Join("..", "contract", "contract.go"), nil, 0)
	require.NoError(t, err)
	constants := map[string]bool{}
	ast.Inspect(cf, func(n ast.Node) bool {
		if v, ok := n.(*ast.ValueSpec); ok {
			if id, ok := v.Type.(*ast.Ident); ok && id.Name == "EntryKind" {
				lit := v.Values[0].(*ast.BasicLit)
				constants[v.Names[0].Name] = known[strings.Trim(lit.Value, `"`)]
			}
		}
		return true
	})
	notes := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "note" {
				return true
			}
			notes++
			at := fset.Position(call.Pos())
			require.GreaterOrEqual(t, len(call.Args), 2, "%s: a note without a kind", at)
			switch k := call.Args[0].(type) {
			case *ast.SelectorExpr:
				pkg, ok := k.X.(*ast.Ident)
				require.True(t, ok && pkg.Name == "contract" && constants[k.Sel.Name], "%s: the kind %s is not a constant of contract.EntryKinds", at, k.Sel.Name)
			case *ast.Ident:
				require.Equal(t, "kind", k.Name, "%s: a note's kind is a contract constant or the variable kind", at)
			default:
				require.Failf(t, "a note's kind is a contract constant", "%s: %T", at, k)
			}
			return true
		})
	}
	require.Greater(t, notes, 80, "the notes of the workflow")
}
