package workflows

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"github.com/acme/smsorch/contract"
)

// transitions are the changes of SmsState that the package's workflow
// tests saw a run make ("[*]" for its first value), across every test.
var transitions = struct {
	sync.Mutex
	seen map[[2]string]string // from, to -> a test that made it
}{seen: map[[2]string]string{}}

// observeStates records every SmsState the harness's run upserts, in
// h.states and as transitions.
func observeStates(h *harness) {
	h.env.OnUpsertTypedSearchAttributes(mock.Anything).Run(func(args mock.Arguments) {
		sa, ok := args.Get(0).(temporal.SearchAttributes)
		if !ok {
			return
		}
		v, ok := sa.GetKeyword(contract.StateAttribute)
		if !ok {
			return
		}
		h.mu.Lock()
		from := "[*]"
		if n := len(h.states); n > 0 {
			from = h.states[n-1]
		}
		h.states = append(h.states, v)
		h.mu.Unlock()
		if from == v {
			return
		}
		transitions.Lock()
		defer transitions.Unlock()
		if _, ok := transitions.seen[[2]string{from, v}]; !ok {
			transitions.seen[[2]string{from, v}] = h.t.Name()
		}
	}).Return().Maybe()
}

// smsStates returns the SmsState values the run upserted, in order
// (observeStates records them for every harness).
func (h *harness) smsStates() func() []string {
	return func() []string {
		h.mu.Lock()
		defer h.mu.Unlock()
		return slices.Clone(h.states)
	}
}

// diagramEdge is one "A --> B" line of a Mermaid state diagram.
var diagramEdge = regexp.MustCompile(`^\s*(\[\*\]|\w+)\s*-->\s*(\[\*\]|\w+)`)

// stateDiagram reads the SmsState diagram of docs/design.md.
func stateDiagram() (map[[2]string]bool, error) {
	b, err := os.ReadFile("../docs/design.md")
	if err != nil {
		return nil, err
	}
	text := string(b)
	start := strings.Index(text, "stateDiagram-v2")
	if start < 0 {
		return nil, fmt.Errorf("docs/design.md has no stateDiagram-v2")
	}
	end := strings.Index(text[start:], "```")
	edges := map[[2]string]bool{}
	for _, line := range strings.Split(text[start:start+end], "\n") {
		if m := diagramEdge.FindStringSubmatch(line); m != nil {
			edges[[2]string{m[1], m[2]}] = true
		}
	}
	return edges, nil
}

// TestMain runs the package's tests, then checks that the state diagram
// of docs/design.md has every transition of SmsState a test saw a run
// make: a run can take no path the diagram does not show.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := checkDiagram(); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: docs/design.md's SmsState diagram:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func checkDiagram() error {
	edges, err := stateDiagram()
	if err != nil {
		return err
	}
	states := map[string]bool{"[*]": true}
	for _, s := range contract.States {
		states[string(s)] = true
	}
	var problems []string
	for e := range edges {
		for _, s := range e {
			if !states[s] {
				problems = append(problems, fmt.Sprintf("%q is not a state of contract.States", s))
			}
		}
	}
	transitions.Lock()
	defer transitions.Unlock()
	for e, test := range transitions.seen {
		if !edges[e] {
			problems = append(problems, fmt.Sprintf("%s --> %s is missing (%s made it)", e[0], e[1], test))
		}
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(slices.Compact(problems), "; "))
	}
	return nil
}

// The diagram check can fail: a transition the diagram lacks is named.
func TestTheDiagramCheckNamesAMissingTransition(t *testing.T) {
	transitions.Lock()
	transitions.seen[[2]string{"Delivered", "Sending"}] = t.Name()
	transitions.Unlock()
	err := checkDiagram()
	transitions.Lock()
	delete(transitions.seen, [2]string{"Delivered", "Sending"})
	transitions.Unlock()
	if err == nil || !strings.Contains(err.Error(), "Delivered --> Sending is missing") {
		t.Fatalf("a transition missing from the diagram passed: %v", err)
	}
}
