package mutation

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"
)

// Main is smsmutants: it judges every mutant of the catalogue (or those
// -run names) with the simulation's seeds and prints each outcome and
// the score. It exits 1 when a mutant cannot be judged (it does not
// apply or build: the catalogue needs mending), 2 on bad flags.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("smsmutants", flag.ContinueOnError)
	fs.SetOutput(stderr)
	catalogue := fs.String("catalogue", "simulation/mutants", "the directory of mutants (*.patch, each with a \"breaks:\" line)")
	repo := fs.String("repo", ".", "the repository the mutants are planted in (never changed: go reads the mutated files through -overlay)")
	seeds := fs.Int("seeds", 10000, "seeds to run on each mutant (.ci/run runs 10000)")
	base := fs.Int64("base", 1001, "the first seed (.ci/run starts at 1001)")
	run := fs.String("run", "", "judge only the mutants whose name matches this regular expression")
	timeout := fs.Duration("timeout", 20*time.Minute, "the longest one mutant's simulation may take")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var only *regexp.Regexp
	if *run != "" {
		var err error
		if only, err = regexp.Compile(*run); err != nil {
			fmt.Fprintf(stderr, "smsmutants: -run %q: %v\n", *run, err)
			return 2
		}
	}
	all, err := Load(*catalogue)
	if err != nil {
		fmt.Fprintf(stderr, "smsmutants: %v\n", err)
		return 2
	}
	scratch, err := os.MkdirTemp("", "smsmutants-")
	if err != nil {
		fmt.Fprintf(stderr, "smsmutants: %v\n", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(scratch) }()
	o := Options{Seeds: *seeds, Base: *base, Package: "./simulation", Timeout: *timeout}
	var chosen []Mutant
	for _, m := range all {
		if only == nil || only.MatchString(m.Name) {
			chosen = append(chosen, m)
		}
	}
	fmt.Fprintf(stdout, "judging %d of the %d mutants of %s with %d seeds from %d\n", len(chosen), len(all), *catalogue, o.Seeds, o.Base)
	var outs []Outcome
	for _, m := range chosen {
		if ctx.Err() != nil {
			break
		}
		out := Judge(ctx, *repo, scratch, m, o)
		outs = append(outs, out)
		fmt.Fprintln(stdout, line(out))
	}
	s := Tally(outs)
	fmt.Fprintf(stdout, "score: %d of %d killed (%.0f%%)\n", s.Killed, s.Judged, s.Percent())
	fmt.Fprintf(stdout, "killed by one seed only: %s\n", list(s.Lucky))
	fmt.Fprintf(stdout, "survivors: %s\n", list(s.Survivors))
	if len(s.Broken) > 0 {
		fmt.Fprintf(stdout, "not judged (mend the catalogue): %s\n", list(s.Broken))
		return 1
	}
	return 0
}

func line(o Outcome) string {
	took := o.Took.Round(time.Second)
	switch {
	case o.Err != nil:
		return fmt.Sprintf("%-44s NOT JUDGED  %v", o.Mutant.Name, o.Err)
	case o.Crashed != "":
		return fmt.Sprintf("%-44s killed      the simulation did not finish (%s) [%s]", o.Mutant.Name, o.Crashed, took)
	case o.Killed:
		return fmt.Sprintf("%-44s killed      %d seed(s), lowest %d; seed %d: %s [%s]", o.Mutant.Name, len(o.Seeds), o.Seeds[0], o.FirstSeed, clip(o.First, 160), took)
	}
	return fmt.Sprintf("%-44s SURVIVED    (%s) [%s]", o.Mutant.Name, o.Mutant.Breaks, took)
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func list(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}
