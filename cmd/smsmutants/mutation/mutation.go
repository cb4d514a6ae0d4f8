// Package mutation measures the deterministic simulation by the defects
// it catches: each mutant of a catalogue is a small, plausible defect
// kept as a patch, planted alone into the code through go's -overlay
// (the checkout is never touched), and the simulation runs its seeds on
// it. A mutant is killed when a seed breaks a promise; the score is the
// share killed. docs/testing.md, "The mutation score", has the catalogue's
// last score and every survivor explained.
package mutation

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Mutant is one planted defect: a patch against the repository, and a
// line that says what it breaks.
type Mutant struct {
	// Name is the patch's file name without ".patch".
	Name string
	// Breaks is the patch's "breaks:" line: the promise it breaks, in a
	// sentence.
	Breaks string
	// Patch is the unified diff, as git diff writes it.
	Patch []byte
	// Files are the repository paths the patch changes.
	Files []string
}

// Load reads the catalogue: every *.patch in dir, in name order. Each
// starts with a "breaks: ..." line, and changes at least one file.
func Load(dir string) ([]Mutant, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.patch"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no mutant in %s: the catalogue is a directory of *.patch files", dir)
	}
	sort.Strings(paths)
	var out []Mutant
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		m, err := parse(strings.TrimSuffix(filepath.Base(p), ".patch"), b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, m)
	}
	return out, nil
}

func parse(name string, b []byte) (Mutant, error) {
	m := Mutant{Name: name, Patch: b}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "breaks:") && m.Breaks == "":
			m.Breaks = strings.TrimSpace(strings.TrimPrefix(line, "breaks:"))
		case strings.HasPrefix(line, "+++ b/"):
			m.Files = append(m.Files, strings.TrimPrefix(line, "+++ b/"))
		case strings.HasPrefix(line, "+++ "):
			return m, fmt.Errorf("%q: a patch changes files in place (+++ b/path), as git diff writes it", line)
		}
	}
	if m.Breaks == "" {
		return m, errors.New(`no "breaks:" line: say what the mutant breaks before its diff`)
	}
	if len(m.Files) == 0 {
		return m, errors.New("no file changed: the patch has no +++ b/ line")
	}
	return m, nil
}

// Plant applies m to copies of the files it changes, under scratch, and
// writes the overlay that makes go build read them in place of repo's.
// It returns the overlay file's path.
func Plant(repo, scratch string, m Mutant) (string, error) {
	repo, err := filepath.Abs(repo)
	if err != nil {
		return "", err
	}
	if scratch, err = filepath.Abs(scratch); err != nil {
		return "", err
	}
	dir := filepath.Join(scratch, m.Name)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	replace := map[string]string{}
	for _, f := range m.Files {
		src := filepath.Join(repo, filepath.FromSlash(f))
		b, err := os.ReadFile(src)
		if err != nil {
			return "", fmt.Errorf("mutant %s changes %s: %w", m.Name, f, err)
		}
		dst := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			return "", err
		}
		replace[src] = dst
	}
	// git apply outside a repository patches the files under its working
	// directory, and refuses a patch that does not fit them exactly.
	cmd := exec.Command("git", "apply", "--whitespace=nowarn", "-")
	cmd.Dir = dir
	// The ceiling keeps git from taking a repository above the scratch
	// directory for its own: the patch's paths are the copies'.
	cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+scratch)
	cmd.Stdin = bytes.NewReader(m.Patch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mutant %s does not apply to this checkout (re-make its patch with git diff): %s", m.Name, strings.TrimSpace(string(out)))
	}
	overlay := filepath.Join(dir, "overlay.json")
	b, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		return "", err
	}
	return overlay, os.WriteFile(overlay, b, 0o644)
}

// Options say which seeds judge each mutant.
type Options struct {
	// Seeds lifetimes from Base, as .ci/run's simulation runs them.
	Seeds int
	Base  int64
	// Package is the simulation's package pattern ("./simulation").
	Package string
	// Timeout bounds one mutant's go test.
	Timeout time.Duration
}

// Outcome is what the simulation made of one mutant.
type Outcome struct {
	Mutant Mutant
	// Killed: a seed broke a promise, or the simulation could not finish
	// (Crashed says how it ended).
	Killed  bool
	Crashed string
	// Seeds are the seeds that broke a promise, in order. First is the
	// promise broken in the first line go test printed, by FirstSeed: the
	// seeds run on several cores, so that is not always the lowest seed.
	Seeds     []int64
	First     string
	FirstSeed int64
	// Err is set when the mutant could not be judged: it does not apply
	// or does not build. It is a fault of the catalogue, not a score.
	Err  error
	Took time.Duration
}

var (
	brokeLine   = regexp.MustCompile(`seed (\d+) broke a promise: (.*)`)
	summaryLine = regexp.MustCompile(`simulation: \d+ seeds from -?\d+ .* \d+ failed`)
)

// Judge plants m and runs the simulation's seeds on it.
func Judge(ctx context.Context, repo, scratch string, m Mutant, o Options) Outcome {
	start := time.Now()
	out := Outcome{Mutant: m}
	overlay, err := Plant(repo, scratch, m)
	if err != nil {
		out.Err = err
		return out
	}
	args := []string{"test", "-count=1", "-overlay=" + overlay, o.Package,
		"-run", "^TestSimulation$", "-timeout", o.Timeout.String(),
		"-seeds", strconv.Itoa(o.Seeds), "-base", strconv.FormatInt(o.Base, 10),
		"-max-failures", strconv.Itoa(o.Seeds), "-brief"}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = repo
	text, runErr := cmd.CombinedOutput()
	out.Took = time.Since(start)
	read(&out, text, runErr)
	return out
}

// read fills the outcome from go test's output.
func read(out *Outcome, text []byte, runErr error) {
	s := string(text)
	if strings.Contains(s, "[build failed]") || strings.Contains(s, "[setup failed]") {
		out.Err = fmt.Errorf("mutant %s does not build: %s", out.Mutant.Name, lastLines(s, 8))
		return
	}
	for _, m := range brokeLine.FindAllStringSubmatch(s, -1) {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		if out.First == "" {
			out.First, out.FirstSeed = m[2], n
		}
		out.Seeds = append(out.Seeds, n)
	}
	slices.Sort(out.Seeds)
	out.Killed = len(out.Seeds) > 0
	if summaryLine.MatchString(s) {
		return
	}
	if runErr != nil && !out.Killed {
		// No summary: the test panicked, hung or timed out. The simulation
		// noticed; say how.
		out.Killed, out.Crashed = true, lastLines(s, 4)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// Score is the share of judged mutants killed, and the kills that hang
// on a single seed.
type Score struct {
	Judged, Killed int
	// Lucky are the mutants killed by one seed only: the next range of
	// seeds may miss them.
	Lucky []string
	// Survivors are the mutants no seed killed.
	Survivors []string
	// Broken are the mutants that could not be judged.
	Broken []string
}

// Tally scores the outcomes.
func Tally(outs []Outcome) Score {
	var s Score
	for _, o := range outs {
		switch {
		case o.Err != nil:
			s.Broken = append(s.Broken, o.Mutant.Name)
		case o.Killed:
			s.Judged++
			s.Killed++
			if len(o.Seeds) == 1 {
				s.Lucky = append(s.Lucky, o.Mutant.Name)
			}
		default:
			s.Judged++
			s.Survivors = append(s.Survivors, o.Mutant.Name)
		}
	}
	return s
}

// Percent is the score in per cent of the judged mutants.
func (s Score) Percent() float64 {
	if s.Judged == 0 {
		return 0
	}
	return 100 * float64(s.Killed) / float64(s.Judged)
}
