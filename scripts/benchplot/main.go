// Command benchplot draws the side-by-side benchmark's chart with
// gonum.org/v1/plot: requests per second (left) and server CPU microseconds
// per request (right), one group of bars per scenario, one bar per server,
// with the range of the repeats as error bars.
//
//	benchplot -in summary.tsv -out chart.png [-title "host, date"]
//	benchplot -latency -in latency-runs.jsonl -out DIR [-title "..."] [-floor-pct 80]
//
// The input is the TSV that scripts/benchreport writes with -tsv. The output
// format follows the file's extension: .png or .svg.
//
// With -latency (latency.go) the input is scripts/bench-latency.sh's runs,
// and it writes DIR/latency-summary.md (medians per step, where each
// server's p99 crosses 1 ms, the issue-29 floors, the check against vegeta)
// and DIR/latency-PROTOCOL.png: p50 and p99 against the requests/s achieved,
// a line per server, a panel per connection count.
//
// It is a module of its own so that the plotting library stays out of
// percore's dependencies; scripts/bench.sh builds it and skips the chart,
// with a note, when it cannot.
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

func main() {
	in := flag.String("in", "", "summary TSV from benchreport -tsv (required)")
	out := flag.String("out", "chart.png", "output file, .png or .svg")
	title := flag.String("title", "", "title above the chart")
	latency := flag.Bool("latency", false, "latency mode: -in is bench-latency.sh's runs (JSON lines), -out a directory")
	floorPct := flag.Float64("floor-pct", 80, "with -latency: the percentage of the reference's capacity the floor runs ran at")
	flag.Parse()
	if *in == "" {
		fmt.Fprintln(os.Stderr, "benchplot: -in is required")
		os.Exit(2)
	}
	var err error
	if *latency {
		err = runLatency(*in, *out, *title, *floorPct)
	} else {
		err = run(*in, *out, *title)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchplot: %v\n", err)
		os.Exit(1)
	}
}

// figure is one server's result in one scenario.
type figure struct {
	scenario, server string
	rps, cpu         [3]float64 // median, min, max
}

// readSummary parses the TSV: a header line, then one figure per line.
func readSummary(r io.Reader) ([]figure, error) {
	var figs []figure
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		if n == 1 || strings.TrimSpace(sc.Text()) == "" {
			continue // header
		}
		f := strings.Split(sc.Text(), "\t")
		if len(f) < 8 {
			return nil, fmt.Errorf("line %d: %d fields, want at least 8", n, len(f))
		}
		fig := figure{scenario: f[0], server: f[1]}
		for i := range 3 {
			var err error
			if fig.rps[i], err = strconv.ParseFloat(f[2+i], 64); err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			if fig.cpu[i], err = strconv.ParseFloat(f[5+i], 64); err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
		}
		figs = append(figs, fig)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(figs) == 0 {
		return nil, errors.New("no figures to draw")
	}
	return figs, nil
}

// ordered returns the distinct values of key in order of first appearance.
func ordered(figs []figure, key func(figure) string) []string {
	var out []string
	seen := make(map[string]bool)
	for _, f := range figs {
		if k := key(f); !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// bars is one server's bars in a panel, with their spread as error bars.
type bars struct {
	x, med, lo, hi []float64
}

func (b bars) Len() int                    { return len(b.x) }
func (b bars) XY(i int) (float64, float64) { return b.x[i], b.med[i] }
func (b bars) YError(i int) (float64, float64) {
	return b.med[i] - b.lo[i], b.hi[i] - b.med[i]
}

// panelWidth is the width of one of the two panels.
const panelWidth = 7 * vg.Inch

// panel draws one figure (pick chooses rps or cpu) of every server.
func panel(figs []figure, scenarios, servers []string, title, ylabel string, pick func(figure) [3]float64, legend bool) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Y.Min = 0
	p.NominalX(scenarios...)
	p.X.Min, p.X.Max = -0.5, float64(len(scenarios))-0.5
	if legend {
		p.Legend.Top = true
		p.Legend.Left = true
	}

	// Leave room above the tallest whisker, and for the legend.
	top := 0.0
	for _, f := range figs {
		top = max(top, pick(f)[2])
	}
	p.Y.Max = top * 1.08
	if legend {
		p.Y.Max = top * (1.1 + 0.06*float64(len(servers)))
	}

	slot := 0.8 / float64(len(servers)) // of one scenario's unit of x
	// Bar widths are in canvas units: estimate the data area's width.
	width := (panelWidth - vg.Inch) * vg.Length(slot/float64(len(scenarios)))
	for k, srv := range servers {
		var b bars
		values := make(plotter.Values, len(scenarios))
		for i, sc := range scenarios {
			for _, f := range figs {
				if f.scenario == sc && f.server == srv {
					v := pick(f)
					values[i] = v[0]
					b.x = append(b.x, float64(i)+(float64(k)-float64(len(servers)-1)/2)*slot)
					b.med, b.lo, b.hi = append(b.med, v[0]), append(b.lo, v[1]), append(b.hi, v[2])
				}
			}
		}
		bc, err := plotter.NewBarChart(values, width)
		if err != nil {
			return nil, err
		}
		bc.XMin = (float64(k) - float64(len(servers)-1)/2) * slot
		bc.Color = plotutil.Color(k)
		bc.LineStyle.Width = 0
		p.Add(bc)
		if b.Len() > 0 {
			eb, err := plotter.NewYErrorBars(b)
			if err != nil {
				return nil, err
			}
			p.Add(eb)
		}
		if legend {
			p.Legend.Add(srv, bc)
		}
	}
	return p, nil
}

func run(in, out, title string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	figs, err := readSummary(f)
	_ = f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	scenarios := ordered(figs, func(f figure) string { return f.scenario })
	servers := ordered(figs, func(f figure) string { return f.server })

	rps, err := panel(figs, scenarios, servers, "requests/s (higher is better)", "requests/s",
		func(f figure) [3]float64 { return f.rps }, true)
	if err != nil {
		return err
	}
	cpu, err := panel(figs, scenarios, servers, "server CPU per request (lower is better)", "CPU µs/request",
		func(f figure) [3]float64 { return f.cpu }, false)
	if err != nil {
		return err
	}

	const height = 5 * vg.Inch
	titleSpace := vg.Length(0)
	if title != "" {
		titleSpace = 0.4 * vg.Inch
	}
	w, h := 2*panelWidth, height+titleSpace
	var c interface {
		vg.CanvasSizer
		io.WriterTo
	}
	switch strings.ToLower(filepath.Ext(out)) {
	case ".png":
		c = vgimg.PngCanvas{Canvas: vgimg.New(w, h)}
	case ".svg":
		c = vgsvg.New(w, h)
	default:
		return fmt.Errorf("%s: want a .png or .svg file", out)
	}
	dc := draw.New(c)
	if title != "" {
		top := draw.Canvas{Canvas: dc.Canvas, Rectangle: dc.Rectangle}
		top.Min.Y = dc.Max.Y - titleSpace
		style := rps.Title.TextStyle
		style.XAlign, style.YAlign = draw.XCenter, draw.YCenter
		top.FillText(style, vg.Point{X: (top.Min.X + top.Max.X) / 2, Y: (top.Min.Y + top.Max.Y) / 2}, title)
		dc.Max.Y -= titleSpace
	}
	plots := [][]*plot.Plot{{rps, cpu}}
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Inch / 4, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8}
	canvases := plot.Align(plots, tiles, dc)
	rps.Draw(canvases[0][0])
	cpu.Draw(canvases[0][1])

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
