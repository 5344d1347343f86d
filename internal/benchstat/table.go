package benchstat

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Legend explains the flags and columns; WriteMarkdown prints it under the
// table.
const Legend = `Flags: S = the server's CPUs were >= 85% busy (server-bound: its req/s is its own limit);
C = the load generator's CPU was >= 85% busy (client-bound: req/s is a lower bound, compare CPU/req);
E = a run had errors, mismatched replies or a server that did not exit cleanly;
T = a run had hypervisor steal above 5%; N = other processes used more than 10% of a CPU during a run
(the machine was shared). Such runs are left out of the medians when a clean repeat exists.
Each figure is the median of the repeats, with their range in parentheses; xBASE is the ratio to the
baseline server's median in the same scenario. CPU/req is the server's utime+stime over the window
divided by the requests in it; ctxsw/req sums voluntary and involuntary switches over its threads;
sys/req comes from a separate shorter run under perf stat (n/a without linux-perf); client is the
load generator's own CPU per request; RSS is the server's peak (VmHWM).`

// columns are the table's headings; base names the baseline server.
func columns(base string) []string {
	return []string{
		"scenario", "server", "req/s (min-max)", "x" + base, "CPU us/req (min-max)", "x" + base,
		"p50 us", "p99 us", "p99.9 us", "ctxsw/req", "sys/req", "client us/req", "RSS MiB", "flags",
	}
}

// cells formats a row for the table.
func (r Row) cells() []string {
	return []string{
		r.Scenario,
		r.Server,
		fmt.Sprintf("%s (%s-%s)", rate(r.RPS.Med), rate(r.RPS.Min), rate(r.RPS.Max)),
		optional(r.RPSRatio, "%.2f"),
		fmt.Sprintf("%.2f (%.2f-%.2f)", r.CPU.Med, r.CPU.Min, r.CPU.Max),
		optional(r.CPURatio, "%.2f"),
		fmt.Sprintf("%.0f", r.P50us),
		fmt.Sprintf("%.0f", r.P99us),
		fmt.Sprintf("%.0f", r.P999us),
		fmt.Sprintf("%.3f", r.CtxswPerReq),
		optional(r.SyscallsPerReq, "%.2f"),
		fmt.Sprintf("%.2f", r.ClientCPUus),
		fmt.Sprintf("%.1f", r.PeakRSSMiB),
		r.Flags,
	}
}

// rate formats a request rate compactly: 812, 71.3k, 1.25M.
func rate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func optional(v *float64, format string) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf(format, *v)
}

// WriteText prints the table aligned for a terminal, then the memory per
// idle connection of any scenario that held idle connections.
func WriteText(w io.Writer, rows []Row, base string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(columns(base), "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r.cells(), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writeIdle(w, rows, "  ")
}

// WriteMarkdown prints a title, the command that produced the runs, a
// paragraph about the machine, the table and its legend as GitHub markdown;
// empty parts are left out.
func WriteMarkdown(w io.Writer, rows []Row, base, title, command, about string) error {
	if title != "" {
		fmt.Fprintf(w, "# %s\n\n", title)
	}
	if command != "" {
		fmt.Fprintf(w, "Produced by:\n\n```sh\n%s\n```\n\n", command)
	}
	if about != "" {
		fmt.Fprintf(w, "%s\n\n", about)
	}
	cols := columns(base)
	fmt.Fprintf(w, "| %s |\n", strings.Join(cols, " | "))
	fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", len(cols)))
	for _, r := range rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r.cells(), " | "))
	}
	fmt.Fprintln(w)
	if err := writeIdle(w, rows, "- "); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%s\n", Legend)
	return err
}

// writeIdle prints one line, starting with item, per row that measured
// memory per idle connection.
func writeIdle(w io.Writer, rows []Row, item string) error {
	var seen bool
	for _, r := range rows {
		if r.IdleBytesPerConn == nil {
			continue
		}
		if !seen {
			if _, err := fmt.Fprintf(w, "\nMemory per idle connection, (RSS with N idle - RSS without) / N:\n\n"); err != nil {
				return err
			}
			seen = true
		}
		if _, err := fmt.Fprintf(w, "%s%s %s: %.0f B per connection (%d idle)\n",
			item, r.Scenario, r.Server, *r.IdleBytesPerConn, r.IdleConns); err != nil {
			return err
		}
	}
	return nil
}

// TSVHeader is the first line WriteTSV prints.
const TSVHeader = "scenario\tserver\trps_med\trps_min\trps_max\tcpu_us_med\tcpu_us_min\tcpu_us_max\tflags"

// WriteTSV prints the figures the chart draws, one row per line, for
// scripts/benchplot.
func WriteTSV(w io.Writer, rows []Row) error {
	if _, err := fmt.Fprintln(w, TSVHeader); err != nil {
		return err
	}
	for _, r := range rows {
		_, err := fmt.Fprintf(w, "%s\t%s\t%.1f\t%.1f\t%.1f\t%.3f\t%.3f\t%.3f\t%s\n",
			r.Scenario, r.Server, r.RPS.Med, r.RPS.Min, r.RPS.Max, r.CPU.Med, r.CPU.Min, r.CPU.Max, r.Flags)
		if err != nil {
			return err
		}
	}
	return nil
}
