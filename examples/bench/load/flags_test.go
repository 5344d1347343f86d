package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"defaults", nil, ""},
		{"everything", []string{"-conns", "10", "-bytes", "512", "-pipeline", "16", "-idle", "5", "-warmup", "0", "-seconds", "0.5", "-json", "-server-pid", "1", "-perf"}, ""},
		{"no connections", []string{"-conns", "0"}, "-conns"},
		{"empty requests", []string{"-bytes", "0"}, "-bytes"},
		{"pipeline zero", []string{"-pipeline", "0"}, "-pipeline"},
		{"churn with pipeline", []string{"-reconnect", "-pipeline", "2"}, "-reconnect"},
		{"empty window", []string{"-seconds", "0"}, "-seconds"},
		{"perf without pid", []string{"-perf"}, "-server-pid"},
		{"stray argument", []string{"x"}, "unexpected"},
		{"open loop", []string{"-rate", "1000", "-max-inflight", "4", "-late", "2ms", "-max-late", "0"}, ""},
		{"sweep", []string{"-rates", "10%,50%,3000", "-capacity", "9000"}, ""},
		{"negative rate", []string{"-rate", "-1"}, "-rate"},
		{"rate and rates", []string{"-rate", "10", "-rates", "10%"}, "-rates"},
		{"open loop with pipeline", []string{"-rate", "10", "-pipeline", "4"}, "-max-inflight"},
		{"sweep with pipeline", []string{"-rates", "10%", "-pipeline", "4"}, "-max-inflight"},
		{"no in-flight", []string{"-rate", "10", "-max-inflight", "0"}, "-max-inflight"},
		{"bad rates", []string{"-rates", "10%,x"}, "rate \"x\""},
		{"late fraction above 1", []string{"-rate", "10", "-max-late", "2"}, "-max-late"},
		{"capacity without rates", []string{"-capacity", "100"}, "-capacity"},
		{"batched waits", []string{"-rate", "1000", "-wait-batch", "64", "-wait-min", "50us", "-pace", "50us"}, ""},
		{"negative wait batch", []string{"-wait-batch", "-1"}, "-wait-batch"},
		{"polling", []string{"-rate", "1000", "-spin", "1ms"}, ""},
		{"negative spin", []string{"-rate", "1000", "-spin", "-1ms"}, "-spin"},
		{"negative wait min", []string{"-wait-batch", "8", "-wait-min", "-1us"}, "-wait-min"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseFlags(tt.args, io.Discard)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("parseFlags: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("parseFlags error %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
	if _, err := engineByName("nope"); err == nil {
		t.Errorf("engineByName(\"nope\") succeeded")
	}
}

func TestRunExitStatusForBadFlags(t *testing.T) {
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"-conns", "-1"}, io.Discard, &stderr); code != 2 {
		t.Errorf("exit status %d, want 2; stderr:\n%s", code, stderr.String())
	}
}

func TestResultProblem(t *testing.T) {
	tests := []struct {
		name string
		res  Result
		want string
	}{
		{"clean", Result{Requests: 10}, ""},
		{"mismatch", Result{Requests: 10, Mismatches: 1}, "differed"},
		{"errors", Result{Requests: 10, Errors: 2}, "connection errors"},
		{"nothing completed", Result{}, "no request"},
		{"open loop on time", Result{Requests: 1000, Rate: 1000, Paced: 1000, LateSends: 1, maxLate: 0.001}, ""},
		{"open loop behind", Result{Requests: 1000, Rate: 1000, Paced: 1000, LateSends: 2, maxLate: 0.001}, "fell behind"},
		{"open loop strict", Result{Requests: 1000, Rate: 1000, Paced: 1000, LateSends: 1}, "fell behind"},
		{"closed loop ignores late", Result{Requests: 1000, LateSends: 5}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.res.problem()
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("problem() = %q, want one containing %q", got, tt.want)
			}
		})
	}
}

func TestParseProcFiles(t *testing.T) {
	t.Run("stat with a tricky command name", func(t *testing.T) {
		stat := []byte("1234 (a b) c)) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 7 0 1000 100000 200 18446744073709551615\n")
		got, err := parseStatCPU(stat)
		if err != nil || got != 3*time.Second {
			t.Errorf("parseStatCPU = %v, %v, want 3s (300 ticks)", got, err)
		}
		if _, err := parseStatCPU([]byte("1234 (x) S 1")); err == nil {
			t.Errorf("parseStatCPU accepted a short line")
		}
	})
	t.Run("status", func(t *testing.T) {
		f := parseStatus([]byte("Name:\tx\nVmHWM:\t  5000 kB\nThreads:\t7\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t3\n"))
		if f["VmHWM"] != 5000 || f["Threads"] != 7 || f["voluntary_ctxt_switches"]+f["nonvoluntary_ctxt_switches"] != 15 {
			t.Errorf("parseStatus = %v", f)
		}
	})
	t.Run("steal and other processes", func(t *testing.T) {
		a := parseProcStat([]byte("cpu  100 0 100 700 0 0 0 100 0 0\ncpu0 1 2 3\n"))
		b := parseProcStat([]byte("cpu  200 0 200 1400 0 50 50 200 0 0\n"))
		if got := stealPct(a, b); got != 100.0*100/1100 {
			t.Errorf("stealPct = %v, want %v", got, 100.0*100/1100)
		}
		// 200 ticks of user+system is 2s; ours was 1.5s.
		if got := otherCPU(a, b, 1500*time.Millisecond); got != 500*time.Millisecond {
			t.Errorf("otherCPU = %v, want 500ms", got)
		}
		if got := otherCPU(a, b, 3*time.Second); got != 0 {
			t.Errorf("otherCPU = %v when ours exceeds the machine's, want 0", got)
		}
	})
	t.Run("this process", func(t *testing.T) {
		s, err := sampleProc(os.Getpid())
		if err != nil || s.ctxsw == 0 {
			t.Errorf("sampleProc(self) = %+v, %v", s, err)
		}
		if m, err := readMemory(os.Getpid()); err != nil || m.hwm == 0 || m.rss == 0 {
			t.Errorf("readMemory(self) = %+v, %v", m, err)
		}
		if _, err := sampleProc(-5); err == nil {
			t.Errorf("sampleProc(-5) succeeded")
		}
	})
}

func TestParsePerf(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		want    uint64
		wantErr bool
	}{
		{"counted", "123456,,raw_syscalls:sys_enter,5001234567,100.00,,\n", 123456, false},
		{"among other lines", "# started\n15,,context-switches,500,100.00,,\n99,,raw_syscalls:sys_enter,500,100.00,,\n", 99, false},
		{"not counted", "<not counted>,,raw_syscalls:sys_enter,0,100.00,,\n", 0, true},
		{"missing", "perf: permission denied\n", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parsePerf(tt.out, syscallEvent)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("parsePerf = %d, %v, want %d (error %v)", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
