package benchstat

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/percore/percore/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// run builds a throughput run of 50 connections, 64 B.
func run(scenario, server string, repeat int, rps, cpu float64) Run {
	return Run{Kind: KindRun, Scenario: scenario, Server: server, Repeat: repeat, Load: Load{
		Conns: 50, Bytes: 64, Pipeline: 1, Requests: uint64(rps * 5), RPS: rps,
		P50us: 500, P99us: 900, P999us: 2000, ServerCPUusPerReq: cpu, ServerCtxswPerReq: 0.1,
		ServerBusyPct: 50, ClientBusyPct: 50, ServerVmHWMKiB: 10240, ServerVmRSSKiB: 8192,
	}}
}

func raw(t *testing.T, runs ...Run) string {
	t.Helper()
	var b strings.Builder
	for _, r := range runs {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteString("\n\n") // blank lines are allowed
	}
	return b.String()
}

func find(t *testing.T, rows []Row, scenario, server string) Row {
	t.Helper()
	for _, r := range rows {
		if r.Scenario == scenario && r.Server == server {
			return r
		}
	}
	t.Fatalf("no row for %s %s", scenario, server)
	return Row{}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }

func TestSummarize(t *testing.T) {
	perf := run("c50", "fast", 1, 70_000, 9)
	perf.Kind = KindPerf
	sys := 0.15
	perf.Load.ServerSyscallsPerReq = &sys
	saturated := run("c50", "slow", 3, 45_000, 21)
	saturated.Load.ServerBusyPct = 97
	stolen := run("c50", "fast", 4, 10_000, 40)
	stolen.Load.StealPct = 12
	disturbed := run("c50", "fast", 5, 20_000, 30)
	disturbed.Load.OtherCPUPct = 40
	onlyDisturbed := run("c1000", "fast", 1, 20_000, 30)
	onlyDisturbed.Load.OtherCPUPct = 40
	idle := run("idle", "fast", 1, 60_000, 10)
	idle.Load.Idle = 10_000
	idle.Load.ServerVmRSSKiB = 8192 + 10_000*2 // 2 KiB per idle connection
	bad := run("c1000", "slow", 1, 1000, 30)
	bad.Load.Errors = 3
	bad.ServerExit = 1

	in := raw(t,
		run("c50", "base", 1, 50_000, 15), run("c50", "fast", 1, 80_000, 8), run("c50", "slow", 1, 40_000, 20),
		run("c50", "base", 2, 52_000, 14), run("c50", "fast", 2, 100_000, 10), run("c50", "slow", 2, 44_000, 22),
		saturated, stolen, disturbed, perf, idle, bad, onlyDisturbed,
	)
	runs, err := ReadRuns(strings.NewReader(in))
	if err != nil {
		t.Fatalf("ReadRuns: %v", err)
	}
	rows := Summarize(runs, "base")

	tests := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"order follows first appearance", func(t *testing.T) {
			var got []string
			for _, r := range rows {
				got = append(got, r.Scenario+"/"+r.Server)
			}
			want := "c50/base c50/fast c50/slow idle/fast c1000/slow c1000/fast"
			if strings.Join(got, " ") != want {
				t.Errorf("rows %v, want %s", got, want)
			}
		}},
		{"median of two is their mean, with the range", func(t *testing.T) {
			r := find(t, rows, "c50", "fast")
			if r.RPS != (Spread{Med: 90_000, Min: 80_000, Max: 100_000}) || r.CPU != (Spread{Med: 9, Min: 8, Max: 10}) {
				t.Errorf("RPS %+v CPU %+v", r.RPS, r.CPU)
			}
		}},
		{"median of three is the middle one", func(t *testing.T) {
			r := find(t, rows, "c50", "slow")
			if r.RPS.Med != 44_000 || r.Runs != 3 {
				t.Errorf("RPS %+v over %d runs, want median 44000 over 3", r.RPS, r.Runs)
			}
		}},
		{"ratios to the baseline", func(t *testing.T) {
			r := find(t, rows, "c50", "fast")
			if r.RPSRatio == nil || !near(*r.RPSRatio, 90_000.0/51_000) || r.CPURatio == nil || !near(*r.CPURatio, 9/14.5) {
				t.Errorf("ratios %v %v", r.RPSRatio, r.CPURatio)
			}
			if b := find(t, rows, "c50", "base"); b.RPSRatio == nil || *b.RPSRatio != 1 {
				t.Errorf("the baseline's own ratio is %v, want 1", b.RPSRatio)
			}
			if r := find(t, rows, "c1000", "slow"); r.RPSRatio != nil {
				t.Errorf("a scenario without the baseline has ratio %v, want none", *r.RPSRatio)
			}
		}},
		{"stolen and disturbed runs rejected and flagged", func(t *testing.T) {
			r := find(t, rows, "c50", "fast")
			if r.Rejected != 2 || r.Runs != 2 || r.Flags != "TN" {
				t.Errorf("rejected %d, runs %d, flags %q; want 2, 2, TN", r.Rejected, r.Runs, r.Flags)
			}
		}},
		{"disturbed runs kept when there is nothing else", func(t *testing.T) {
			r := find(t, rows, "c1000", "fast")
			if r.Rejected != 0 || r.Runs != 1 || r.RPS.Med != 20_000 || r.Flags != "N" {
				t.Errorf("rejected %d, runs %d, rps %v, flags %q; want 0, 1, 20000, N", r.Rejected, r.Runs, r.RPS.Med, r.Flags)
			}
		}},
		{"perf run gives syscalls only", func(t *testing.T) {
			r := find(t, rows, "c50", "fast")
			if r.SyscallsPerReq == nil || *r.SyscallsPerReq != sys {
				t.Errorf("syscalls %v, want %v", r.SyscallsPerReq, sys)
			}
			if b := find(t, rows, "c50", "base"); b.SyscallsPerReq != nil {
				t.Errorf("syscalls without a perf run: %v", *b.SyscallsPerReq)
			}
		}},
		{"saturated server flagged by the median", func(t *testing.T) {
			if r := find(t, rows, "c50", "slow"); strings.Contains(r.Flags, "S") {
				t.Errorf("one busy run out of three flagged S: %q (median busy %v)", r.Flags, r.ServerBusyPct)
			}
		}},
		{"errors and server exit flagged", func(t *testing.T) {
			r := find(t, rows, "c1000", "slow")
			if !strings.Contains(r.Flags, "E") || r.Errors != 4 {
				t.Errorf("flags %q errors %d, want E and 4 (3 + the exit)", r.Flags, r.Errors)
			}
		}},
		{"memory per idle connection", func(t *testing.T) {
			r := find(t, rows, "idle", "fast")
			if r.IdleBytesPerConn == nil || !near(*r.IdleBytesPerConn, 2048) {
				t.Errorf("idle bytes per connection %v, want 2048", r.IdleBytesPerConn)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.check)
	}

	if p := Problems(runs); len(p) != 2 || !strings.Contains(p[0], "connection errors") || !strings.Contains(p[1], "exited") {
		t.Errorf("Problems = %q, want the errors and the exit status of c1000/slow", p)
	}
}

// TestIdleBytesPerConnection: the memory of the idle connections is shared
// among those that were opened, not those asked for; a raw file from before
// idle_open was recorded falls back to the number asked for.
func TestIdleBytesPerConnection(t *testing.T) {
	tests := []struct {
		name       string
		idle, open int
		wantConns  int
	}{
		{"all opened", 10_000, 10_000, 10_000},
		{"some failed to open", 10_000, 4_000, 4_000},
		{"older raw file without idle_open", 10_000, 0, 10_000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idle := run("idle", "x", 1, 60_000, 10)
			idle.Load.Idle, idle.Load.IdleOpen = tt.idle, tt.open
			idle.Load.ServerVmRSSKiB = uint64(8192 + tt.wantConns*2) // 2 KiB per open idle connection
			rows := Summarize([]Run{run("busy", "x", 1, 60_000, 10), idle}, "x")
			r := find(t, rows, "idle", "x")
			if r.IdleConns != tt.wantConns {
				t.Errorf("%d idle connections, want %d", r.IdleConns, tt.wantConns)
			}
			if r.IdleBytesPerConn == nil || !near(*r.IdleBytesPerConn, 2048) {
				t.Errorf("idle bytes per connection %v, want 2048", r.IdleBytesPerConn)
			}
		})
	}
}

func TestSaturationFlags(t *testing.T) {
	tests := []struct {
		name         string
		server, load float64
		want         string
	}{
		{"neither", 60, 60, ""},
		{"server", 90, 60, "S"},
		{"client", 60, 85, "C"},
		{"both", 99, 99, "SC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run("s", "x", 1, 1000, 10)
			r.Load.ServerBusyPct, r.Load.ClientBusyPct = tt.server, tt.load
			rows := Summarize([]Run{r}, "x")
			if rows[0].Flags != tt.want {
				t.Errorf("flags %q, want %q", rows[0].Flags, tt.want)
			}
		})
	}
}

func TestProblems(t *testing.T) {
	zero := run("s", "x", 1, 0, 0)
	zero.Load.Requests = 0
	mismatch := run("s", "x", 2, 1000, 1)
	mismatch.Load.Mismatches = 1
	tests := []struct {
		name string
		run  Run
		want string
	}{
		{"clean", run("s", "x", 1, 1000, 1), ""},
		{"zero requests", zero, "no request"},
		{"mismatch", mismatch, "differed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := strings.Join(Problems([]Run{tt.run}), "; ")
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("Problems = %q, want one containing %q", got, tt.want)
			}
		})
	}
}

func TestReadRunsRejectsGarbage(t *testing.T) {
	_, err := ReadRuns(strings.NewReader("{\"server\":\"x\"}\nnot json\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("ReadRuns error %v, want one naming line 2", err)
	}
}

func TestWriters(t *testing.T) {
	runs := []Run{run("c50", "base", 1, 50_000, 15), run("c50", "other", 1, 1_500_000, 5)}
	rows := Summarize(runs, "base")
	tests := []struct {
		name  string
		write func(*bytes.Buffer) error
		want  []string
	}{
		{"text", func(b *bytes.Buffer) error { return WriteText(b, rows, "base") },
			[]string{"xbase", "50.0k (50.0k-50.0k)", "1.50M", "30.00", "0.33", "n/a"}},
		{"markdown", func(b *bytes.Buffer) error { return WriteMarkdown(b, rows, "base", "Title", "make bench", "2 vCPU") },
			[]string{"# Title", "```sh\nmake bench\n```\n\n2 vCPU\n", "| scenario | server |", "|---|", "Flags: S ="}},
		{"tsv", func(b *bytes.Buffer) error { return WriteTSV(b, rows) },
			[]string{TSVHeader, "c50\tother\t1500000.0\t1500000.0\t1500000.0\t5.000"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tt.write(&b); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
}
