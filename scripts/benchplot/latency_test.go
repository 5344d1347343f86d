package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCrossing(t *testing.T) {
	pts := func(p99s ...float64) []point {
		var out []point
		for i, p := range p99s {
			out = append(out, point{step: "x", pct: float64(10 * (i + 1)), p99: p, valid: 1})
		}
		return out
	}
	tests := []struct {
		name string
		pts  []point
		want string
	}{
		{"crosses between steps", pts(100, 500, 1500), "about 25% (between 20%: 500 us and 30%: 1500 us)"},
		{"already above at the first", pts(2000, 3000), "at or below 10%"},
		{"never", pts(100, 200, 300), "not up to 30%"},
		{"invalid steps skipped", append(pts(100), point{pct: 20, p99: 5000}, point{pct: 30, p99: 1100, valid: 1}), "about 28% (between 10%: 100 us and 30%: 1100 us)"},
		{"nothing valid", []point{{pct: 10}}, "no valid step"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := crossing(tt.pts, 1000); !strings.HasPrefix(got, tt.want) {
				t.Errorf("crossing = %q, want it to start with %q", got, tt.want)
			}
		})
	}
}

// TestLatencyReport summarises a small set of runs: medians over the valid
// repeats only, the floors' verdicts, the vegeta and wrk2 tables, and a chart.
func TestLatencyReport(t *testing.T) {
	runs := `{"kind":"sweep","protocol":"echo","server":"a","conns":50,"repeat":1,"status":0,"load":{"step":"capacity","rate":0,"rps":100000,"requests":300000,"p50_us":30,"p99_us":90}}
{"kind":"sweep","protocol":"echo","server":"a","conns":50,"repeat":1,"status":0,"load":{"step":"50%","rate":50000,"rps":50000,"requests":150000,"p50_us":40,"p99_us":400}}
{"kind":"sweep","protocol":"echo","server":"a","conns":50,"repeat":2,"status":1,"load":{"step":"50%","rate":50000,"rps":50000,"requests":150000,"p50_us":40,"p99_us":99999,"problem":"invalid run: the generator fell behind"}}
{"kind":"sweep","protocol":"echo","server":"a","conns":50,"repeat":3,"status":0,"load":{"step":"50%","rate":50000,"rps":50000,"requests":150000,"p50_us":44,"p99_us":600}}
{"kind":"sweep","protocol":"echo","server":"a","conns":50,"repeat":1,"status":0,"load":{"step":"100%","rate":100000,"rps":99000,"requests":297000,"p50_us":900,"p99_us":1500}}
{"kind":"sweep","protocol":"echo","server":"netpoll","conns":50,"repeat":1,"status":0,"load":{}}
{"kind":"floor-netpoll","protocol":"echo","server":"percore-uring","conns":50,"repeat":1,"status":0,"load":{"rate":40000,"rps":40000,"requests":120000,"p50_us":30,"p99_us":100}}
{"kind":"floor-netpoll","protocol":"echo","server":"netpoll","conns":50,"repeat":1,"status":0,"load":{"rate":40000,"rps":40000,"requests":120000,"p50_us":60,"p99_us":300}}
{"kind":"floor-netpoll","protocol":"echo","server":"liburing","conns":50,"repeat":1,"status":0,"load":{"rate":40000,"rps":40000,"requests":120000,"p50_us":30,"p99_us":70}}
{"kind":"check","protocol":"http","server":"percore","conns":50,"repeat":1,"status":0,"load":{"rate":5000,"rps":5000,"requests":15000,"p50_us":50,"p99_us":200}}
{"kind":"vegeta","protocol":"http","server":"percore","conns":50,"repeat":1,"target_rate":5000,"vegeta":{"latencies":{"50th":60000,"99th":230000},"rate":5000.2,"success":1}}
{"kind":"wrk2","protocol":"http","server":"percore","conns":50,"repeat":1,"target_rate":5000,"report":{"latencies":{"50th":55000,"99th":210000},"rate":4999.1,"success":1}}
`
	dir := t.TempDir()
	in := filepath.Join(dir, "runs.jsonl")
	if err := os.WriteFile(in, []byte(runs), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runLatency(in, dir, "test", 80); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "latency-summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| a | 50% | 50000 | 50000 | 42 | 0 | 500 (400-600) |", // the invalid repeat left out of the median
		"2/3 |",
		"| netpoll | - | | | | | | | | | 0/1 |",
		"about 75% (between 50%: 500 us and 100%: 1500 us)",
		"percore-uring p99 is 0.33x netpoll's, the median over 1 paired repeats (#1 100/300 us = 0.33x; floor: at most 0.5x): holds",
		"percore-uring p99 is 1.43x liburing's, the median over 1 paired repeats (#1 100/70 us = 1.43x; floor: at most 1.2x): MISSED",
		"| percore | 5000 | 50 | 200 | 60 | 230 | 1.15 | 5000 | 100.0% | 1 |",
		"## The independent check: wrk2",
		"| percore | 5000 | 50 | 200 | 55 | 210 | 1.05 | 4999 | 100.0% | 1 |",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("summary lacks %q:\n%s", want, md)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "latency-echo.png")); err != nil || st.Size() == 0 {
		t.Errorf("no echo chart: %v", err)
	}
	// A protocol whose every step was invalid still gets its chart, empty.
	empty := filepath.Join(dir, "empty.jsonl")
	if err := os.WriteFile(empty, []byte(`{"kind":"sweep","protocol":"http","server":"x","conns":50,"repeat":1,"load":{"step":"10%","rate":10,"rps":10,"requests":30,"problem":"invalid run"}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runLatency(empty, dir, "test", 80); err != nil {
		t.Fatalf("all steps invalid: %v", err)
	}
	if st, err := os.Stat(filepath.Join(dir, "latency-http.png")); err != nil || st.Size() == 0 {
		t.Errorf("no http chart: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "latency-resp.png")); err == nil {
		t.Errorf("a chart for a protocol without runs")
	}
}
