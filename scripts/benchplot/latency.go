package main

// The latency mode (-latency): scripts/bench-latency.sh's runs, one JSON
// object per line, summarised into a Markdown report and drawn as one chart
// per protocol of p50 and p99 against the requests/s achieved, one line per
// server, a panel per connection count.

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// maxLate is examples/bench/load's default -max-late: the fraction of late sends
// above which an open-loop run is invalid (checked here too, for results
// that predate the problem field of single runs).
const maxLate = 0.001

// median returns the median of xs (NaN when empty).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// point is the median of one server's repeats at one step.
type point struct {
	step              string
	pct               float64 // the step's percentage (0: capacity)
	rate, rps         float64
	p50, p90, p99     float64
	p999, lagP99      float64
	valid, runs       int
	lo99, hi99        float64 // the range of p99 over the valid repeats
	problems          []string
	serverBusy, cBusy float64
}

// curveKey names one server's curve.
type curveKey struct {
	protocol string
	conns    int
	server   string
}

// aggregate groups the results of kind (sweep, floor-REF, check) by
// curve and step, and takes medians over the valid repeats.
func aggregate(runs []latRun, kind func(string) bool) map[curveKey][]point {
	type acc struct {
		rate, rps, p50, p90, p99, p999, lag, sb, cb []float64
		runs                                        int
		problems                                    []string
	}
	groups := map[curveKey]map[string]*acc{}
	for _, r := range runs {
		if !kind(r.Kind) || r.clientReport() != nil {
			continue
		}
		k := curveKey{r.Protocol, r.Conns, r.Server}
		if groups[k] == nil {
			groups[k] = map[string]*acc{}
		}
		step := "-"
		if r.Load != nil {
			step = r.Load.Step
			if step == "" {
				step = strconv.FormatFloat(r.Load.Rate, 'f', 0, 64)
			}
		}
		a := groups[k][step]
		if a == nil {
			a = &acc{}
			groups[k][step] = a
		}
		a.runs++
		if why := r.Load.why(); why != "" {
			a.problems = append(a.problems, fmt.Sprintf("#%d: %s", r.Repeat, why))
			continue
		}
		l := r.Load
		a.rate, a.rps = append(a.rate, l.Rate), append(a.rps, l.RPS)
		a.p50, a.p90, a.p99, a.p999 = append(a.p50, l.P50), append(a.p90, l.P90), append(a.p99, l.P99), append(a.p999, l.P999)
		a.lag, a.sb, a.cb = append(a.lag, l.SendLagP99), append(a.sb, l.ServerBusy), append(a.cb, l.ClientBusy)
	}
	out := map[curveKey][]point{}
	for k, steps := range groups {
		for step, a := range steps {
			p := point{step: step, runs: a.runs, valid: len(a.p99), problems: a.problems,
				rate: median(a.rate), rps: median(a.rps), p50: median(a.p50), p90: median(a.p90), p99: median(a.p99),
				p999: median(a.p999), lagP99: median(a.lag), serverBusy: median(a.sb), cBusy: median(a.cb)}
			if len(a.p99) > 0 {
				p.lo99, p.hi99 = slices.Min(a.p99), slices.Max(a.p99)
			}
			if pct, ok := strings.CutSuffix(step, "%"); ok {
				p.pct, _ = strconv.ParseFloat(pct, 64)
			}
			out[k] = append(out[k], p)
		}
		sort.Slice(out[k], func(i, j int) bool {
			a, b := out[k][i], out[k][j]
			if (a.step == "capacity") != (b.step == "capacity") {
				return a.step == "capacity"
			}
			if a.pct != b.pct {
				return a.pct < b.pct
			}
			return a.rate < b.rate
		})
	}
	return out
}

// crossing says at what fraction of its own capacity a curve's median p99
// reaches limit us, interpolating between the steps around it.
func crossing(pts []point, limit float64) string {
	var prev *point
	for i := range pts {
		p := &pts[i]
		if p.pct == 0 || p.valid == 0 {
			continue
		}
		if p.p99 >= limit {
			if prev == nil {
				return fmt.Sprintf("at or below %.0f%% (p99 %.0f us there)", p.pct, p.p99)
			}
			f := prev.pct + (limit-prev.p99)/(p.p99-prev.p99)*(p.pct-prev.pct)
			return fmt.Sprintf("about %.0f%% (between %.0f%%: %.0f us and %.0f%%: %.0f us)", f, prev.pct, prev.p99, p.pct, p.p99)
		}
		prev = p
	}
	if prev == nil {
		return "no valid step"
	}
	return fmt.Sprintf("not up to %.0f%% (p99 %.0f us there)", prev.pct, prev.p99)
}

func sortedKeys(m map[curveKey][]point) []curveKey {
	keys := make([]curveKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.protocol != b.protocol {
			return a.protocol < b.protocol
		}
		if a.conns != b.conns {
			return a.conns < b.conns
		}
		return a.server < b.server
	})
	return keys
}

// writeLatencyReport writes the Markdown summary.
func writeLatencyReport(w io.Writer, runs []latRun, title string, floorPct float64) {
	sweeps := aggregate(runs, func(k string) bool { return k == "sweep" })
	floors := aggregate(runs, func(k string) bool { return strings.HasPrefix(k, "floor-") })
	checks := aggregate(runs, func(k string) bool { return k == "check" })
	fmt.Fprintf(w, "# %s\n\n", title)
	fmt.Fprintf(w, "Medians over the valid repeats (a step whose generator fell behind its schedule, that had errors, or that ran while other processes used more than 10%% of a CPU is left out; \"valid\" counts them). "+
		"Latencies in microseconds, from each request's due time (open loop); the capacity row is the closed-loop run that the percentages are of.\n")

	keys := sortedKeys(sweeps)
	last := curveKey{}
	for _, k := range keys {
		if k.protocol != last.protocol || k.conns != last.conns {
			fmt.Fprintf(w, "\n## %s, %d connections\n\n", k.protocol, k.conns)
			fmt.Fprintln(w, "| server | step | rate/s | achieved/s | p50 | p90 | p99 (range) | p99.9 | send lag p99 | server busy | valid |")
			fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
			last = k
		}
		for _, p := range sweeps[k] {
			if p.valid == 0 {
				fmt.Fprintf(w, "| %s | %s | | | | | | | | | 0/%d |\n", k.server, p.step, p.runs)
				continue
			}
			rate := fmt.Sprintf("%.0f", p.rate)
			if p.step == "capacity" {
				rate = "closed loop"
			}
			fmt.Fprintf(w, "| %s | %s | %s | %.0f | %.0f | %.0f | %.0f (%.0f-%.0f) | %.0f | %.0f | %.0f%% | %d/%d |\n",
				k.server, p.step, rate, p.rps, p.p50, p.p90, p.p99, p.lo99, p.hi99, p.p999, p.lagP99, p.serverBusy, p.valid, p.runs)
		}
	}

	fmt.Fprintf(w, "\n## Where p99 crosses 1 ms, as a fraction of the server's own closed-loop capacity\n\n")
	fmt.Fprintln(w, "| protocol | connections | server | capacity/s | p99 reaches 1 ms at |")
	fmt.Fprintln(w, "|---|---:|---|---:|---|")
	for _, k := range keys {
		capacity := math.NaN()
		for _, p := range sweeps[k] {
			if p.step == "capacity" {
				capacity = p.rps
			}
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.0f | %s |\n", k.protocol, k.conns, k.server, capacity, crossing(sweeps[k], 1000))
	}

	if len(floors) > 0 {
		fmt.Fprintf(w, "\n## The floors (issue 29), at %.0f%% of the reference's closed-loop capacity\n\n", floorPct)
		fmt.Fprintln(w, "| protocol | connections | server | rate/s | achieved/s | p50 | p99 (range) | p99.9 | valid |")
		fmt.Fprintln(w, "|---|---:|---|---:|---:|---:|---:|---:|---:|")
		p99 := map[curveKey]float64{}
		for _, k := range sortedKeys(floors) {
			// One rate per repeat (each repeat's own reference capacity):
			// take the median over every run of the server.
			var rates, rps, p50s, p99s, p999s []float64
			valid, n := 0, 0
			for _, p := range floors[k] {
				n += p.runs
				if p.valid > 0 {
					valid += p.valid
					rates, rps = append(rates, p.rate), append(rps, p.rps)
					p50s, p99s, p999s = append(p50s, p.p50), append(p99s, p.p99), append(p999s, p.p999)
				}
			}
			p99[k] = median(p99s)
			lo, hi := math.NaN(), math.NaN()
			if len(p99s) > 0 {
				lo, hi = slices.Min(p99s), slices.Max(p99s)
			}
			fmt.Fprintf(w, "| %s | %d | %s | %.0f | %.0f | %.0f | %.0f (%.0f-%.0f) | %.0f | %d/%d |\n",
				k.protocol, k.conns, k.server, median(rates), median(rps), median(p50s), p99[k], lo, hi, median(p999s), valid, n)
		}
		fmt.Fprintln(w)
		writeFloors(w, runs, floors)
		writeFloorRuns(w, runs)
	}

	fmt.Fprintf(w, "\n## Runs left out of the medians\n\n")
	left := 0
	for _, set := range []map[curveKey][]point{sweeps, floors, checks} {
		for _, k := range sortedKeys(set) {
			for _, p := range set[k] {
				for _, why := range p.problems {
					left++
					if len(why) > 160 {
						why = why[:160] + "..."
					}
					fmt.Fprintf(w, "- %s, %d connections, %s, %s: %s\n", k.protocol, k.conns, k.server, p.step, why)
				}
			}
		}
	}
	if left == 0 {
		fmt.Fprintln(w, "None.")
	}

	for _, client := range []struct{ kind, title string }{
		{"vegeta", "vegeta v12.13.0"},
		{"wrk2", "wrk2 (giltene/wrk2, HdrHistogram-corrected, 1 thread)"},
	} {
		checkTable(w, runs, checks, client.kind, client.title)
	}
}

// checkTable writes the independent check's table for one client: its
// percentiles beside examples/bench/load's at the same rate on the same
// server.
func checkTable(w io.Writer, runs []latRun, checks map[curveKey][]point, kind, title string) {
	var rs []latRun
	for _, r := range runs {
		if r.Kind == kind && r.clientReport() != nil {
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "\n## The independent check: %s and examples/bench/load at the same rate, same server (HTTP, 50 connections)\n\n", title)
	fmt.Fprintf(w, "| server | rate/s | load p50 | load p99 | %[1]s p50 | %[1]s p99 | %[1]s/load p99 | %[1]s sent/s | %[1]s success | repeats |\n", kind)
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	type vk struct {
		server string
		rate   float64
	}
	vs := map[vk][]*vegetaReport{}
	for _, r := range rs {
		k := vk{r.Server, r.TargetRate}
		vs[k] = append(vs[k], r.clientReport())
	}
	vkeys := make([]vk, 0, len(vs))
	for k := range vs {
		vkeys = append(vkeys, k)
	}
	sort.Slice(vkeys, func(i, j int) bool {
		if vkeys[i].server != vkeys[j].server {
			return vkeys[i].server < vkeys[j].server
		}
		return vkeys[i].rate < vkeys[j].rate
	})
	for _, k := range vkeys {
		var v50, v99, vrate, vsucc []float64
		for _, v := range vs[k] {
			v50, v99 = append(v50, v.Latencies.P50/1e3), append(v99, v.Latencies.P99/1e3)
			vrate, vsucc = append(vrate, v.Rate), append(vsucc, v.Success)
		}
		l50, l99 := math.NaN(), math.NaN()
		for _, p := range checks[curveKey{"http", 50, k.server}] {
			if p.valid > 0 && p.rate == k.rate {
				l50, l99 = p.p50, p.p99
			}
		}
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.2f | %.0f | %.1f%% | %d |\n",
			k.server, k.rate, l50, l99, median(v50), median(v99), median(v99)/l99, median(vrate), 100*median(vsucc), len(vs[k]))
	}
}

// latencyChart draws one protocol's chart: a panel per connection count,
// p99 (solid) and p50 (dashed) against the requests/s achieved, a colour
// per server.
func latencyChart(sweeps map[curveKey][]point, protocol, title, out string) error {
	var conns []int
	var servers []string
	for k := range sweeps {
		if k.protocol != protocol {
			continue
		}
		if !slices.Contains(conns, k.conns) {
			conns = append(conns, k.conns)
		}
		if !slices.Contains(servers, k.server) {
			servers = append(servers, k.server)
		}
	}
	if len(conns) == 0 {
		return nil
	}
	slices.Sort(conns)
	slices.Sort(servers)
	var plots []*plot.Plot
	for _, c := range conns {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s, %d connections: p99 solid, p50 dashed", protocol, c)
		p.X.Label.Text = "requests/s achieved"
		p.Y.Label.Text = "latency µs (log)"
		p.X.Min = 0
		p.Legend.Top, p.Legend.Left = true, true
		lo, hi := math.Inf(1), 0.0
		for i, s := range servers {
			var q50, q99 plotter.XYs
			for _, pt := range sweeps[curveKey{protocol, c, s}] {
				if pt.pct == 0 || pt.valid == 0 || pt.p50 <= 0 || pt.p99 <= 0 {
					continue
				}
				q50 = append(q50, plotter.XY{X: pt.rps, Y: pt.p50})
				q99 = append(q99, plotter.XY{X: pt.rps, Y: pt.p99})
				lo, hi = min(lo, pt.p50), max(hi, pt.p99)
			}
			if len(q99) == 0 {
				continue
			}
			l99, pts99, err := plotter.NewLinePoints(q99)
			if err != nil {
				return err
			}
			l50, pts50, err := plotter.NewLinePoints(q50)
			if err != nil {
				return err
			}
			col := plotutil.Color(i)
			l99.Color, pts99.Color, l50.Color, pts50.Color = col, col, col, col
			l99.Width = vg.Points(1.5)
			l50.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			pts99.Shape, pts50.Shape = draw.CircleGlyph{}, draw.CircleGlyph{}
			pts50.Radius = vg.Points(2)
			p.Add(l99, pts99, l50, pts50)
			p.Legend.Add(s, l99, pts99)
		}
		if hi == 0 {
			p.Title.Text += " (no valid step)"
		} else {
			p.Y.Scale = plot.LogScale{}
			p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
			// The 1 ms line, the threshold the report speaks of.
			ms, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 1000}, {X: p.X.Max, Y: 1000}})
			if err == nil && p.X.Max > 0 {
				ms.Color = plotutil.Color(7)
				ms.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
				p.Add(ms)
			}
			p.Y.Min, p.Y.Max = max(lo/1.5, 1), max(hi*2, 2000)
		}
		plots = append(plots, p)
	}
	const height = 5 * vg.Inch
	titleSpace := 0.4 * vg.Inch
	w, h := vg.Length(len(plots))*panelWidth, height+titleSpace
	c := vgimg.PngCanvas{Canvas: vgimg.New(w, h)}
	dc := draw.New(c)
	top := draw.Canvas{Canvas: dc.Canvas, Rectangle: dc.Rectangle}
	top.Min.Y = dc.Max.Y - titleSpace
	style := plots[0].Title.TextStyle
	style.XAlign, style.YAlign = draw.XCenter, draw.YCenter
	top.FillText(style, vg.Point{X: (top.Min.X + top.Max.X) / 2, Y: (top.Min.Y + top.Max.Y) / 2}, title)
	dc.Max.Y -= titleSpace
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Inch / 4, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[0][i])
	}
	file, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(file); err != nil {
		_ = file.Close()
		return fmt.Errorf("%s: %w", out, err)
	}
	return file.Close()
}

// runLatency is the -latency mode: the report and the charts into dir.
func runLatency(in, dir, title string, floorPct float64) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	runs, err := readRuns(f)
	_ = f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if title == "" {
		title = "latency against throughput, open loop"
	}
	md, err := os.Create(filepath.Join(dir, "latency-summary.md"))
	if err != nil {
		return err
	}
	writeLatencyReport(md, runs, title, floorPct)
	if err := md.Close(); err != nil {
		return err
	}
	sweeps := aggregate(runs, func(k string) bool { return k == "sweep" })
	for _, proto := range []string{"echo", "http", "resp"} {
		if err := latencyChart(sweeps, proto, title, filepath.Join(dir, "latency-"+proto+".png")); err != nil {
			return fmt.Errorf("%s chart: %w", proto, err)
		}
	}
	return nil
}
