package bench

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
)

// Target is one of the targets as this run measured it.
type Target struct {
	Backend string  `json:"backend"`
	Name    string  `json:"name"`
	Value   float64 `json:"value"`
	// Bound is the target; AtMost says whether Value must stay at or
	// under it (otherwise at or over it).
	Bound  float64 `json:"bound"`
	AtMost bool    `json:"atMost"`
	Met    bool    `json:"met"`
	// Unit names what Value counts ("x" for a ratio).
	Unit string `json:"unit"`
}

func target(backend, name string, value, bound float64, atMost bool, unit string) Target {
	met := value >= bound
	if atMost {
		met = value <= bound
	}
	return Target{Backend: backend, Name: name, Value: value, Bound: bound, AtMost: atMost, Met: met, Unit: unit}
}

// ratio is a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Targets compares the report with the targets: throughput beside bare
// Temporal, the cost of duplicate starts, the tail latency, the memory
// of runs awaiting a decision and the pace to Sendy.
func (r Report) Targets() []Target {
	var out []Target
	rows := map[[2]string]Row{}
	var backends []string
	for _, row := range r.Rows {
		if _, seen := rows[[2]string{row.Backend, ScenarioBare}]; !seen && row.Scenario == ScenarioBare {
			backends = append(backends, row.Backend)
		}
		rows[[2]string{row.Backend, row.Scenario}] = row
	}
	for _, b := range backends {
		bare, ours, three := rows[[2]string{b, ScenarioBare}], rows[[2]string{b, ScenarioOurs}], rows[[2]string{b, ScenarioOurs3x}]
		cost := func(x Row) float64 { return float64(x.WorkerCPUPer1k + x.ServerCPUPer1k) }
		out = append(out,
			target(b, "ours/bare throughput to accepted", ratio(ours.AcceptedPerSec, bare.AcceptedPerSec), 0.8, false, "x"),
			target(b, "ours/bare throughput to delivered", ratio(ours.DonePerSec, bare.DonePerSec), 0.7, false, "x"),
			target(b, "ours-3x/ours time (starts 3x per event)", ratio(ours.DonePerSec, three.DonePerSec), 1.1, true, "x"),
			target(b, "ours-3x/ours CPU (worker+server)", ratio(cost(three), cost(ours)), 1.1, true, "x"),
			target(b, "ours/bare p99 start to accepted", ratio(float64(ours.ToAccepted.P99), float64(bare.ToAccepted.P99)), 1.5, true, "x"),
		)
		if ours.Cost != nil {
			out = append(out,
				target(b, "history events of a delivered Bird run", float64(ours.Cost.Events), 16, true, ""),
				target(b, "billable actions of a delivered Bird run", float64(ours.Cost.Actions), 5, true, ""),
			)
		}
	}
	for _, o := range r.Open {
		if o.Scenario != ScenarioOurs || o.Fixed || (o.Load != 0.25 && o.Load != 0.5) {
			continue
		}
		bare := r.open(o.Backend, ScenarioBare, o.Load)
		p99 := ratio(float64(o.ToAccepted.P99), float64(bare.ToAccepted.P99))
		// The lean run's bounds: 2x at a quarter of bare's rate, 3x at half.
		bound := map[float64]float64{0.25: 2, 0.5: 3}[o.Load]
		out = append(out, target(o.Backend, fmt.Sprintf("ours/bare p99 arrival to accepted, open loop at %.0f%% of bare's rate", o.Load*100), p99, bound, true, "x"))
		if o.Load == 0.5 {
			out = append(out, target(o.Backend, "ours/bare p99 start to accepted, open loop at 50% of bare's rate", p99, 1.3, true, "x"))
		}
	}
	for _, m := range r.Memory {
		out = append(out, target(m.Backend, fmt.Sprintf("worker memory, %d runs awaiting, sticky cache %d", m.Runs, m.StickyCache), m.RSSMB, 200, true, "MB"))
	}
	for _, s := range r.Sendy {
		out = append(out,
			target(s.Backend, fmt.Sprintf("pace to Sendy under its limit of %d/min", s.Limit), s.PerMinute, 0.95*float64(s.Limit), false, "/min"),
			target(s.Backend, "429s from Sendy caused by our pace", float64(s.TooMany), 0, true, ""),
		)
	}
	return out
}

// Print writes the report as tables.
func (r Report) Print(w io.Writer) {
	fmt.Fprintf(w, "smsbench: %d events a scenario, %d starts at a time, %d cores, %s\n", r.N, r.Conc, r.Cores, r.At.Format("2006-01-02 15:04 MST"))
	if len(r.Rows) > 0 {
		r.printRows(w)
		r.printCosts(w)
	}
	if len(r.Open) > 0 {
		r.printOpen(w)
	}
	if len(r.Intake) > 0 {
		r.printIntake(w)
	}
	r.printRest(w)
}

// printRows writes the throughput table.
func (r Report) printRows(w io.Writer) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "backend\tscenario\tevents\tstarts\tevents/s accepted\tevents/s done\taccepted p50/p95/p99 s\tdone p50/p95/p99 s\tworker CPU s/1k\tserver CPU s/1k\tworker peak MB\thistory events\tmessages\t")
	for _, x := range r.Rows {
		server := fmt.Sprintf("%.1f", x.ServerCPUPer1k)
		history := fmt.Sprintf("%.1f", x.HistoryEvents)
		if x.Scenario == ScenarioDirect {
			server, history = "-", "-"
		}
		messages := fmt.Sprint(x.Messages)
		if x.Scenario == ScenarioBare {
			messages = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.1f\t%.1f\t%s\t%s\t%.1f\t%s\t%.0f\t%s\t%s\t\n",
			x.Backend, x.Scenario, x.Events, x.Starts, x.AcceptedPerSec, x.DonePerSec,
			pcts(x.ToAccepted), pcts(x.ToDone), x.WorkerCPUPer1k, server, x.WorkerPeakMB, history, messages)
	}
	_ = tw.Flush()
}

// printOpen writes the open-loop table: latencies from each event's
// arrival, and ours beside bare at the same rate.
func (r Report) printOpen(w io.Writer) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "open loop: Poisson arrivals at a share of bare's saturation rate (events/s done above), and at a fixed rate; latencies from arrival")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "backend\tload\tevents/s\tscenario\tevents\taccepted p50/p95/p99/max s\tdone p50/p95/p99/max s\tp99 accepted ours/bare\tp99 done ours/bare\tmessages\t")
	for _, o := range r.Open {
		ratios, messages := "-\t-", "-"
		if o.Scenario == ScenarioOurs {
			bare := r.open(o.Backend, ScenarioBare, o.Load)
			ratios = fmt.Sprintf("%.2fx\t%.2fx", ratio(float64(o.ToAccepted.P99), float64(bare.ToAccepted.P99)), ratio(float64(o.ToDone.P99), float64(bare.ToDone.P99)))
			messages = fmt.Sprint(o.Messages)
		}
		load := fmt.Sprintf("%.0f%%", o.Load*100)
		if o.Fixed {
			load = fmt.Sprintf("fixed (%.0f%%)", o.Load*100)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%s\t%d\t%s\t%s\t%s\t%s\t\n", o.Backend, load, o.Rate, o.Scenario, o.Events,
			pctsMax(o.ToAccepted), pctsMax(o.ToDone), ratios, messages)
	}
	_ = tw.Flush()
}

// printIntake writes the intake's steps and what it sustained.
func (r Report) printIntake(w io.Writer) {
	fmt.Fprintln(w)
	fmt.Fprintf(w, "intake: signed posts of new events to one intake process (Poisson arrivals; each answered after its run started), steps %.1fx apart until an error or p99 > %s\n", IntakeGrowth, IntakeP99Bound)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "backend\tposts/s\trequests\terrors\tp50/p95/p99/max s\tintake CPU s/1k\tserver CPU s/1k\t")
	for _, x := range r.Intake {
		fmt.Fprintf(tw, "%s\t%.1f\t%d\t%d\t%s\t%.1f\t%.1f\t\n", x.Backend, x.Rate, x.Requests, x.Errors, pctsMax(x.Latency), x.IntakeCPUPer1k, x.ServerCPUPer1k)
	}
	_ = tw.Flush()
	for _, b := range r.intakeBackends() {
		var held *IntakeRow
		for i, x := range r.Intake {
			if x.Backend != b {
				continue
			}
			if x.FirstError != "" {
				fmt.Fprintf(w, "%s: first error at %.1f posts/s: %s\n", b, x.Rate, x.FirstError)
			}
			if x.ok() {
				held = &r.Intake[i]
			}
		}
		if held == nil {
			fmt.Fprintf(w, "%s: the intake held no step\n", b)
			continue
		}
		fmt.Fprintf(w, "%s: the intake held %.1f posts/s (no error, p99 %.3f s), %.1f s of its CPU per 1,000\n", b, held.Rate, held.Latency.P99, held.IntakeCPUPer1k)
	}
}

func (r Report) open(backend, scenario string, load float64) OpenRow {
	for _, o := range r.Open {
		if o.Backend == backend && o.Scenario == scenario && o.Load == load {
			// A fixed rate's row is found by its load too: bare's and
			// ours' have the same.
			return o
		}
	}
	return OpenRow{}
}

func pctsMax(l Latencies) string {
	if l.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f/%.2f/%.2f/%.2f", l.P50, l.P95, l.P99, l.Max)
}

// printRest writes the memory and Sendy tables, the targets and the
// comparison with the plain loop.
func (r Report) printRest(w io.Writer) {
	var tw *tabwriter.Writer
	if len(r.Memory) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "backend\truns awaiting a decision\tsticky cache\tworker RSS MB\tof it the worker's own MB\tworker peak MB\t")
		for _, m := range r.Memory {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.0f\t%.0f\t\n", m.Backend, m.Runs, m.StickyCache, m.RSSMB, m.AnonMB, m.PeakMB)
		}
		_ = tw.Flush()
	}
	if len(r.Sendy) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "backend\tSendy events\tlimit/min\trequests\tbusy minutes\trequests/min\t429s\tmessages\t")
		for _, s := range r.Sendy {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.2f\t%.1f\t%d\t%d\t\n", s.Backend, s.Events, s.Limit, s.Requests, s.Minutes, s.PerMinute, s.TooMany, s.Accepted)
		}
		_ = tw.Flush()
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "backend\ttarget\tmeasured\tbound\t\t")
	for _, t := range r.Targets() {
		op, verdict := ">=", "met"
		if t.AtMost {
			op = "<="
		}
		if !t.Met {
			verdict = "MISSED"
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f%s\t%s %.2f%s\t%s\t\n", t.Backend, t.Name, t.Value, t.Unit, op, t.Bound, t.Unit, verdict)
	}
	_ = tw.Flush()
	for _, b := range r.backends() {
		ours, direct := r.row(b, ScenarioOurs), r.row(b, ScenarioDirect)
		fmt.Fprintf(w, "%s: ours/direct throughput to accepted %.2fx, to delivered %.2fx; CPU per 1k events ours (worker+server) %.1f s, direct %.1f s\n",
			b, ratio(ours.AcceptedPerSec, direct.AcceptedPerSec), ratio(ours.DonePerSec, direct.DonePerSec),
			float64(ours.WorkerCPUPer1k+ours.ServerCPUPer1k), float64(direct.WorkerCPUPer1k))
	}
}

func (r Report) backends() []string {
	return uniqueBackends(len(r.Rows), func(i int) string { return r.Rows[i].Backend })
}

func (r Report) intakeBackends() []string {
	return uniqueBackends(len(r.Intake), func(i int) string { return r.Intake[i].Backend })
}

// uniqueBackends lists the backends of n rows, in their order.
func uniqueBackends(n int, backend func(i int) string) []string {
	var out []string
	seen := map[string]bool{}
	for i := range n {
		if b := backend(i); !seen[b] {
			seen[b] = true
			out = append(out, b)
		}
	}
	return out
}

func (r Report) row(backend, scenario string) Row {
	for _, x := range r.Rows {
		if x.Backend == backend && x.Scenario == scenario {
			return x
		}
	}
	return Row{}
}

func pcts(l Latencies) string {
	if l.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f/%.2f/%.2f", l.P50, l.P95, l.P99)
}

// Check reports a row the run should have printed and did not, or one
// that measured fewer events than it started: a smoke run's assertion,
// with no timing in it.
func (r Report) Check(cfg Config) error {
	for _, b := range cfg.Backends {
		if !cfg.SkipThroughput {
			for _, sc := range []string{ScenarioBare, ScenarioOurs, ScenarioOurs3x, ScenarioDirect} {
				x := r.row(b, sc)
				switch {
				case x.Scenario == "":
					return fmt.Errorf("%s: no %s row", b, sc)
				case x.ToDone.N != cfg.N || x.ToAccepted.N != cfg.N:
					return fmt.Errorf("%s %s: %d events done and %d accepted of %d", b, sc, x.ToDone.N, x.ToAccepted.N, cfg.N)
				case sc != ScenarioBare && x.Messages != cfg.N:
					return fmt.Errorf("%s %s: the simulator created %d messages for %d events", b, sc, x.Messages, cfg.N)
				}
			}
		}
		if !cfg.SkipThroughput {
			loads := cfg.OpenLoads
			if cfg.OpenRate > 0 {
				loads = append(slices.Clone(loads), cfg.OpenRate/r.row(b, ScenarioBare).DonePerSec)
			}
			for _, load := range loads {
				for _, sc := range []string{ScenarioBare, ScenarioOurs} {
					o := r.open(b, sc, load)
					switch {
					case o.Scenario == "" || o.Events == 0:
						return fmt.Errorf("%s: no open-loop %s row at %.0f%% with events", b, sc, load*100)
					case o.ToDone.N != o.Events || o.ToAccepted.N != o.Events:
						return fmt.Errorf("%s open loop %s at %.0f%%: %d events done and %d accepted of %d", b, sc, load*100, o.ToDone.N, o.ToAccepted.N, o.Events)
					case sc == ScenarioOurs && o.Messages != o.Events:
						return fmt.Errorf("%s open loop at %.0f%%: the simulator created %d messages for %d events", b, load*100, o.Messages, o.Events)
					}
				}
			}
		}
		if cfg.IntakeFor > 0 {
			// The first step is the lowest rate: an error there is a
			// defect, not the intake's limit.
			var first *IntakeRow
			for i, x := range r.Intake {
				if x.Backend == b {
					first = &r.Intake[i]
					break
				}
			}
			switch {
			case first == nil || first.Requests == 0:
				return fmt.Errorf("%s: no intake row with requests", b)
			case first.Errors > 0:
				return fmt.Errorf("%s: the intake's first step, %.1f posts/s, had %d errors of %d requests, the first: %s", b, first.Rate, first.Errors, first.Requests, first.FirstError)
			}
		}
		n := 0
		for _, m := range r.Memory {
			if m.Backend == b && m.RSSMB > 0 {
				n++
			}
		}
		if cfg.Await > 0 && n != len(cfg.CacheSizes) {
			return fmt.Errorf("%s: %d memory rows, not %d", b, n, len(cfg.CacheSizes))
		}
		n = 0
		for _, s := range r.Sendy {
			if s.Backend == b && s.Accepted > 0 {
				n++
			}
		}
		if cfg.SendyEvents > 0 && n != 1 {
			return fmt.Errorf("%s: no Sendy row with a message sent", b)
		}
	}
	return nil
}
