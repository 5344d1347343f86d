package scripts_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/percore/percore/internal/leakcheck"
	"golang.org/x/sys/unix"
)

// TestMain runs the tests, or, when this binary was started as bin/fakenic of a fake host (see
// fakenic_test.go), the change a fake command handed to it.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "fakenic" {
		os.Exit(runFake(os.Args[1:]))
	}
	leakcheck.Main(m)
}

// Exit statuses of tune-nic.sh.
const (
	exitOK      = 0
	exitUsage   = 1
	exitGaps    = 2
	exitStepErr = 3
	exitLocked  = 4
)

func wantCode(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d, got:\n%s", code, r)
	}
}

func wantOutput(t *testing.T, r result, fragments ...string) {
	t.Helper()
	for _, f := range fragments {
		if !strings.Contains(r.stdout+r.stderr, f) {
			t.Errorf("output lacks %q:\n%s", f, r)
		}
	}
}

func wantFile(t *testing.T, tr *tree, rel, want string) {
	t.Helper()
	if got := tr.read(t, rel); got != want {
		t.Errorf("%s = %q, want %q", rel, got, want)
	}
}

// wantMask checks a mask file by value, whatever its width.
func wantMask(t *testing.T, tr *tree, rel, want string) {
	t.Helper()
	if got := tr.read(t, rel); normMask(got) != normMask(want) {
		t.Errorf("%s = %q, want the mask %q", rel, got, want)
	}
}

func gapLines(r result) []string {
	var v []string
	for _, l := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(l, "gap: ") {
			v = append(v, l)
		}
	}
	return v
}

func affinity(irq int) string { return fmt.Sprintf("proc/irq/%d/smp_affinity", irq) }

func TestHelpDocumentsExitCodes(t *testing.T) {
	t.Parallel()
	tr := newTree(t, vethHost())
	r := tr.run(t, "--help")
	wantCode(t, r, exitOK)
	wantOutput(t, r, "--check", "--restore", "--dry-run", "--irqbalance", "--flow-entries", "--no-xps", "Exit status:",
		"  0  done", "  1  usage or validation error", "  2  --check: the full hardware recipe does not apply",
		"  3  a step failed after changes began", "--restore: some values could not be put back",
		"  4  another apply or restore holds the lock")
}

func TestUsageErrorsChangeNothing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		host func() host
		args []string
		want string
	}{
		{"no cpus to apply", mlx5Host, nil, "--cpus LIST is required"},
		{"check and restore", mlx5Host, []string{"--check", "--restore"}, "exclude each other"},
		{"unknown option", mlx5Host, []string{"--cpus", "0", "--bogus"}, "unknown argument '--bogus'"},
		{"json without check", mlx5Host, []string{"--cpus", "0", "--json"}, "--json goes with --check"},
		{"dry run with check", mlx5Host, []string{"--check", "--dry-run"}, "--dry-run is for apply and restore"},
		{"lo", mlx5Host, []string{"--cpus", "0", "--dev", "lo"}, "lo is never tuned"},
		{"no such device", mlx5Host, []string{"--cpus", "0", "--dev", "eth7"}, "no network device eth7"},
		{"device with a slash", mlx5Host, []string{"--check", "--dev", "../eth0"}, "bad device name"},
		{"bad irqbalance mode", mlx5Host, []string{"--cpus", "0", "--irqbalance", "kill"}, "ban, stop or ignore"},
		{"zero flow entries", mlx5Host, []string{"--cpus", "0", "--flow-entries", "0"}, "--flow-entries takes a number"},
		{"huge flow entries", mlx5Host, []string{"--cpus", "0", "--flow-entries", "1073741824"}, "--flow-entries takes a number"},
		{"restore with cpus", mlx5Host, []string{"--restore", "--cpus", "0"}, "--restore takes only --dev and --dry-run"},
		{"option without value", mlx5Host, []string{"--cpus"}, "--cpus needs a value"},
		{"no default route", func() host { h := mlx5Host(); h.noRoute = true; return h }, []string{"--check"}, "no default route"},
		{"several default routes", func() host { h := mlx5Host(); h.routes = []string{"eth0", "eth9"}; return h }, []string{"--check"}, "several devices (eth0 eth9): pass --dev"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := newTree(t, tt.host())
			before := tr.sum(t, true)
			r := tr.run(t, tt.args...)
			wantCode(t, r, exitUsage)
			wantOutput(t, r, tt.want)
			tr.wantUnchanged(t, "a usage error", before)
		})
	}
}

func TestBadCPUListsAreRejected(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		online string
		cpus   string
		want   string
	}{
		{"word", "", "abc", "bad CPU list 'abc'"},
		{"empty item", "", "0,,1", "bad CPU list"},
		{"trailing comma", "", "0,", "bad CPU list"},
		{"open range", "", "0-", "bad CPU list"},
		{"negative", "", "-1", "bad CPU list"},
		{"descending range", "", "3-1", "bad CPU range '3-1'"},
		{"duplicate", "", "1,1", "CPU 1 appears twice"},
		{"overlapping ranges", "", "0-3,2", "CPU 2 appears twice"},
		{"offline beyond the last", "", "5", "CPU 5 is not online (online: 0-3)"},
		{"offline in a hole", "0-1,3", "0,2", "CPU 2 is not online (online: 0-1,3)"},
		{"beyond the kernel limit", "", "9000", "beyond the kernel's limit"},
	}
	for _, tt := range tests {
		for _, mode := range []string{"apply", "check"} {
			t.Run(tt.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				h := mlx5Host()
				h.online = tt.online
				tr := newTree(t, h)
				before := tr.sum(t, true)
				args := []string{"--cpus", tt.cpus}
				if mode == "check" {
					args = append(args, "--check")
				}
				r := tr.run(t, args...)
				wantCode(t, r, exitUsage)
				wantOutput(t, r, tt.want)
				if tr.sum(t, true) != before {
					t.Errorf("a bad CPU list changed the tree")
				}
			})
		}
	}
}

func TestCheckVerdicts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		host func() host
		args []string
		code int
		gaps []string // fragments, one per expected gap line, in order
		out  []string
	}{
		{"mlx5", mlx5Host, []string{"--cpus", "0-3"}, exitOK, nil, []string{
			"driver: mlx5_core", "queues: combined 8 (max 16)", "irq 613: queue 0 (mlx5_comp0@pci:0000:3b:00.0) affinity f",
			"ntuple: off (settable", "irqbalance: running; config", "banned IRQs: 5", "rps_sock_flow_entries: 0",
			"rx-7: rps_cpus 0 rps_flow_cnt 0", "tx-0: xps_cpus 0", "verdict: the full hardware recipe applies"}},
		{"intel, all online CPUs by default", intelHost, nil, exitOK, nil, []string{
			"loops: 4 on CPUs 0,1,2,3", "irq 41: queue 0 (eth1-TxRx-0) affinity 8", "verdict: the full hardware recipe applies"}},
		{"virtio single queue", virtioHost, nil, exitGaps, []string{
			"gap: queues: 2 loops, but ens3 has at most 1",
			"gap: ntuple: fixed off on ens3",
			"gap: xps: ens3 has one TX queue"}, []string{
			"irq 25: queue 0 (virtio0-input.0)", "irq 26: queue 0 (virtio0-output.0)", "tx-0: xps_cpus unreadable",
			"steering: software RPS/RFS", "verdict: the full hardware recipe does not apply"}},
		{"veth", vethHost, []string{"--cpus", "0-3"}, exitGaps, []string{
			"gap: irqs: no per-queue IRQs found for veth0",
			"gap: ntuple: fixed off on veth0",
			"gap: rps_sock_flow_entries: not visible here"}, []string{
			"queues: rx 4 tx 4 (max rx 4 tx 4)", "irqs: none found", "rps_sock_flow_entries: not visible here"}},
		{"fewer queues than loops", func() host { h := mlx5Host(); h.nic.MaxCombined = 2; h.nic.Combined = 2; return h }, []string{"--cpus", "0-3"}, exitGaps, []string{
			"gap: queues: 4 loops, but eth0 has at most 2"}, nil},
		{"irqbalance without a config", func() host { h := mlx5Host(); h.conf = ""; return h }, []string{"--cpus", "0-3"}, exitGaps, []string{
			"gap: irqbalance: running, with no"}, []string{"config none"}},
		{"irqbalance ignored", mlx5Host, []string{"--cpus", "0-3", "--irqbalance", "ignore"}, exitGaps, []string{
			"gap: irqbalance: running and left alone"}, nil},
		{"irqbalance stopped instead", func() host { h := mlx5Host(); h.conf = ""; return h }, []string{"--cpus", "0-3", "--irqbalance", "stop"}, exitOK, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := newTree(t, tt.host())
			before := tr.sum(t, true)
			r := tr.run(t, append([]string{"--check"}, tt.args...)...)
			wantCode(t, r, tt.code)
			wantOutput(t, r, tt.out...)
			gaps := gapLines(r)
			if len(gaps) != len(tt.gaps) {
				t.Fatalf("want %d gap lines, got %d:\n%s", len(tt.gaps), len(gaps), r)
			}
			for i, g := range tt.gaps {
				if !strings.HasPrefix(gaps[i], g) || !strings.Contains(gaps[i], "; instead: ") {
					t.Errorf("gap %d = %q, want it to start with %q and say what is done instead", i, gaps[i], g)
				}
			}
			tr.wantUnchanged(t, "--check", before)
			if _, err := os.Stat(tr.stateDir()); err == nil {
				t.Errorf("--check created %s", tr.stateDir())
			}
		})
	}
}

// checkReport is the JSON object of --check --json.
type checkReport struct {
	Device string `json:"device"`
	Driver string `json:"driver"`
	Loops  []int  `json:"loops"`
	Queues struct {
		Mode    string `json:"mode"`
		Max     int    `json:"max"`
		Current int    `json:"current"`
		MaxRX   int    `json:"max_rx"`
		MaxTX   int    `json:"max_tx"`
		RX      int    `json:"rx"`
		TX      int    `json:"tx"`
	} `json:"queues"`
	TargetQueues int `json:"target_queues"`
	IRQs         []struct {
		IRQ      int    `json:"irq"`
		Queue    int    `json:"queue"`
		Name     string `json:"name"`
		Affinity string `json:"affinity"`
	} `json:"irqs"`
	Ntuple     string `json:"ntuple"`
	Irqbalance struct {
		Running bool    `json:"running"`
		Config  *string `json:"config"`
		Banned  []int   `json:"banned"`
	} `json:"irqbalance"`
	RPSSockFlowEntries *int `json:"rps_sock_flow_entries"`
	RXQueues           []struct {
		Queue      int    `json:"queue"`
		RPSCPUs    string `json:"rps_cpus"`
		RPSFlowCnt string `json:"rps_flow_cnt"`
	} `json:"rx_queues"`
	TXQueues []struct {
		Queue   int     `json:"queue"`
		XPSCPUs *string `json:"xps_cpus"`
	} `json:"tx_queues"`
	SoftwareSteering bool `json:"software_steering"`
	Applies          bool `json:"applies"`
	Gaps             []struct {
		Reason  string `json:"reason"`
		Instead string `json:"instead"`
	} `json:"gaps"`
}

func TestCheckJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		host  func() host
		cpus  string
		loops []int
		check func(t *testing.T, n nic, rep checkReport)
	}{
		{"mlx5", mlx5Host, "3,2", []int{3, 2}, func(t *testing.T, n nic, rep checkReport) {
			if rep.Queues.Mode != "combined" || rep.Queues.Max != 16 || rep.Queues.Current != 8 || rep.TargetQueues != 2 {
				t.Errorf("queues = %+v, target %d; want combined 8 of 16, target 2", rep.Queues, rep.TargetQueues)
			}
			if len(rep.IRQs) != 8 {
				t.Fatalf("want the 8 completion vectors, got %+v", rep.IRQs)
			}
			for i, irq := range rep.IRQs {
				if irq.Queue != i || irq.IRQ != n.queueIRQs(i)[0] || irq.Name != fmt.Sprintf("mlx5_comp%d@pci:%s", i, n.Bus) {
					t.Errorf("irqs[%d] = %+v", i, irq)
				}
			}
			if !rep.Irqbalance.Running || rep.Irqbalance.Config == nil || !slices.Equal(rep.Irqbalance.Banned, []int{5}) {
				t.Errorf("irqbalance = %+v", rep.Irqbalance)
			}
			if rep.RPSSockFlowEntries == nil || *rep.RPSSockFlowEntries != 0 {
				t.Errorf("rps_sock_flow_entries = %v, want 0", rep.RPSSockFlowEntries)
			}
		}},
		{"intel", intelHost, "0-3", []int{0, 1, 2, 3}, func(t *testing.T, n nic, rep checkReport) {
			if len(rep.IRQs) != 4 || rep.IRQs[0].Affinity != "8" || rep.IRQs[1].Affinity != "4" {
				t.Errorf("irqs = %+v", rep.IRQs)
			}
		}},
		{"virtio", virtioHost, "0,1", []int{0, 1}, func(t *testing.T, n nic, rep checkReport) {
			if len(rep.TXQueues) != 1 || rep.TXQueues[0].XPSCPUs != nil {
				t.Errorf("tx_queues = %+v, want one with xps_cpus null", rep.TXQueues)
			}
			if len(rep.IRQs) != 2 || rep.IRQs[0].Queue != 0 || rep.IRQs[1].Queue != 0 {
				t.Errorf("irqs = %+v, want input.0 and output.0 for queue 0", rep.IRQs)
			}
			if !rep.SoftwareSteering || rep.Ntuple != "fixed" {
				t.Errorf("software_steering %v, ntuple %q", rep.SoftwareSteering, rep.Ntuple)
			}
		}},
		{"veth", vethHost, "1,0", []int{1, 0}, func(t *testing.T, n nic, rep checkReport) {
			if rep.Queues.Mode != "rxtx" || rep.Queues.RX != 4 || rep.TargetQueues != 2 {
				t.Errorf("queues = %+v, target %d", rep.Queues, rep.TargetQueues)
			}
			if rep.RPSSockFlowEntries != nil || len(rep.IRQs) != 0 || rep.Irqbalance.Config != nil {
				t.Errorf("want no global table, no IRQs, no irqbalance config: %+v", rep)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := tt.host()
			tr := newTree(t, h)
			text := tr.run(t, "--check", "--cpus", tt.cpus)
			r := tr.run(t, "--check", "--json", "--cpus", tt.cpus)
			wantCode(t, r, text.code)
			var rep checkReport
			dec := json.NewDecoder(strings.NewReader(r.stdout))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&rep); err != nil {
				t.Fatalf("parse the JSON: %v\n%s", err, r)
			}
			if dec.More() {
				t.Fatalf("more than one JSON value:\n%s", r)
			}
			if rep.Device != h.nic.Dev || rep.Driver != h.nic.Driver {
				t.Errorf("device %q driver %q", rep.Device, rep.Driver)
			}
			if !slices.Equal(rep.Loops, tt.loops) {
				t.Errorf("loops = %v, want %v", rep.Loops, tt.loops)
			}
			if rep.Applies != (r.code == exitOK) || len(rep.Gaps) != len(gapLines(text)) {
				t.Errorf("applies %v with %d gaps; the text said exit %d with %d gaps", rep.Applies, len(rep.Gaps), text.code, len(gapLines(text)))
			}
			rx, tx := h.nic.queues()
			if len(rep.RXQueues) != rx || len(rep.TXQueues) != tx {
				t.Errorf("%d rx and %d tx queues reported, want %d and %d", len(rep.RXQueues), len(rep.TXQueues), rx, tx)
			}
			tt.check(t, h.nic, rep)
		})
	}
}

func TestApplySizesQueues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		host func() host
		cpus string
		call string
		rx   int
	}{
		{"combined shrinks", mlx5Host, "0-3", "ethtool -L eth0 combined 4", 4},
		{"combined grows", func() host { h := mlx5Host(); h.nic.Combined = 2; return h }, "0-2", "ethtool -L eth0 combined 3", 3},
		{"rx and tx", vethHost, "0,1", "ethtool -L veth0 rx 2 tx 2", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := newTree(t, tt.host())
			r := tr.run(t, "--cpus", tt.cpus)
			wantCode(t, r, exitOK)
			calls := mutating(tr.calls(t))
			if len(calls) == 0 || calls[0] != tt.call {
				t.Fatalf("want %q first, got %q\n%s", tt.call, calls, r)
			}
			if rx, tx := tr.model(t).queues(); rx != tt.rx || tx != tt.rx {
				t.Errorf("model has rx %d tx %d, want %d", rx, tx, tt.rx)
			}
			dirs, _ := filepath.Glob(tr.path("sys/class/net/" + tr.nic.Dev + "/queues/rx-*"))
			if len(dirs) != tt.rx {
				t.Errorf("%d rx queue directories, want %d", len(dirs), tt.rx)
			}
			// The flow tables were set on the queues as they are after the resize.
			for q := range tt.rx {
				if got := tr.read(t, tr.nic.queueRel("rx", q, "rps_flow_cnt")); got == "0" {
					t.Errorf("rx-%d/rps_flow_cnt was not set", q)
				}
			}
		})
	}
}

func TestApplyPinsIRQsInLoopOrder(t *testing.T) {
	t.Parallel()
	t.Run("intel, misc and fdir vectors skipped", func(t *testing.T) {
		t.Parallel()
		h := intelHost()
		tr := newTree(t, h)
		order := []int{2, 0, 3, 1}
		r := tr.run(t, "--cpus", "2,0,3,1")
		wantCode(t, r, exitOK)
		for q, c := range order {
			wantFile(t, tr, affinity(h.nic.queueIRQs(q)[0]), mask(c))
		}
		for _, skipped := range []int{h.nic.IRQBase, h.nic.IRQBase + 90, 200, 201} {
			wantFile(t, tr, affinity(skipped), "f")
		}
	})
	t.Run("mlx5, the IRQs found after the resize", func(t *testing.T) {
		t.Parallel()
		h := mlx5Host()
		tr := newTree(t, h)
		before := h.nic.queueIRQs(0)[0]
		r := tr.run(t, "--cpus", "3,2")
		wantCode(t, r, exitOK)
		n := tr.model(t)
		for q, c := range []int{3, 2} {
			irq := n.queueIRQs(q)[0]
			if irq == before {
				t.Fatalf("the fake did not renumber the IRQs")
			}
			wantFile(t, tr, affinity(irq), mask(c))
		}
		wantFile(t, tr, affinity(h.nic.IRQBase), "f") // mlx5_async0
		if _, err := os.Stat(tr.path(affinity(before))); err == nil {
			t.Errorf("IRQ %d of the old layout still exists", before)
		}
	})
	t.Run("virtio, input and output vectors of queue 0", func(t *testing.T) {
		t.Parallel()
		h := virtioHost()
		tr := newTree(t, h)
		wantCode(t, tr.run(t, "--cpus", "1,0"), exitOK)
		for _, irq := range h.nic.queueIRQs(0) {
			wantFile(t, tr, affinity(irq), mask(1))
		}
		wantFile(t, tr, affinity(h.nic.IRQBase), "3") // virtio0-config
	})
}

func TestApplyNtuple(t *testing.T) {
	t.Parallel()
	t.Run("settable is turned on", func(t *testing.T) {
		t.Parallel()
		tr := newTree(t, mlx5Host())
		wantCode(t, tr.run(t, "--cpus", "0-3"), exitOK)
		if !slices.Contains(tr.calls(t), "ethtool -K eth0 ntuple on") {
			t.Errorf("ntuple was not turned on")
		}
		if got := tr.model(t).Ntuple; got != "on" {
			t.Errorf("ntuple %q", got)
		}
	})
	t.Run("fixed is a gap", func(t *testing.T) {
		t.Parallel()
		tr := newTree(t, vethHost())
		r := tr.run(t, "--cpus", "0-3")
		wantCode(t, r, exitOK)
		wantOutput(t, r, "gap: ntuple: fixed off on veth0")
		for _, c := range tr.calls(t) {
			if strings.HasPrefix(c, "ethtool -K") {
				t.Errorf("ran %q on a fixed feature", c)
			}
		}
	})
}

func TestApplyFlowTables(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		host   func() host
		args   []string
		global string // "" when invisible
		perQ   string
		queues int
	}{
		{"default", mlx5Host, []string{"--cpus", "0-3"}, "32768", "8192", 4},
		{"requested, rounded to a power of two", mlx5Host, []string{"--cpus", "0-3", "--flow-entries", "5000"}, "8192", "2048", 4},
		{"never lowered", func() host { h := mlx5Host(); h.global = 65536; return h }, []string{"--cpus", "0-3"}, "65536", "16384", 4},
		{"three queues round up", func() host { h := mlx5Host(); return h }, []string{"--cpus", "0-2"}, "32768", "16384", 3},
		{"global invisible", vethHost, []string{"--cpus", "0-3"}, "", "8192", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := newTree(t, tt.host())
			r := tr.run(t, tt.args...)
			wantCode(t, r, exitOK)
			if tt.global != "" {
				wantFile(t, tr, "proc/sys/net/core/rps_sock_flow_entries", tt.global)
			} else {
				wantOutput(t, r, "gap: rps_sock_flow_entries: not visible here")
				if _, err := os.Stat(tr.path("proc/sys/net/core/rps_sock_flow_entries")); err == nil {
					t.Errorf("the invisible global table was created")
				}
			}
			for q := range tt.queues {
				wantFile(t, tr, tr.nic.queueRel("rx", q, "rps_flow_cnt"), tt.perQ)
			}
		})
	}
}

func TestApplyRPSOnlyInSoftwareMode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		host func() host
		cpus string
		rps  string // mask every rx queue gets
	}{
		{"hardware queues leave RPS off", mlx5Host, "0-3", "0"},
		{"hardware queues turn stray RPS off", func() host {
			h := mlx5Host()
			h.preset = map[string]string{h.nic.queueRel("rx", 0, "rps_cpus"): "3\n"}
			return h
		}, "0-3", "0"},
		{"single queue spreads over the loops", virtioHost, "1,0", mask(0, 1)},
		{"fewer queues than loops", func() host { h := mlx5Host(); h.nic.MaxCombined = 2; return h }, "0-3", mask(0, 1, 2, 3)},
		{"no IRQs", vethHost, "2,3", mask(2, 3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := newTree(t, tt.host())
			wantCode(t, tr.run(t, "--cpus", tt.cpus), exitOK)
			rx, _ := tr.model(t).queues()
			for q := range rx {
				wantMask(t, tr, tr.nic.queueRel("rx", q, "rps_cpus"), tt.rps)
			}
		})
	}
}

func TestApplyXPS(t *testing.T) {
	t.Parallel()
	t.Run("tx-i to CPU i", func(t *testing.T) {
		t.Parallel()
		tr := newTree(t, mlx5Host())
		wantCode(t, tr.run(t, "--cpus", "1,0,3,2"), exitOK)
		for q, c := range []int{1, 0, 3, 2} {
			wantFile(t, tr, tr.nic.queueRel("tx", q, "xps_cpus"), mask(c))
		}
	})
	t.Run("unreadable xps_cpus is a gap", func(t *testing.T) {
		t.Parallel()
		tr := newTree(t, virtioHost())
		r := tr.run(t, "--cpus", "0,1")
		wantCode(t, r, exitOK)
		wantOutput(t, r, "gap: xps: ens3 has one TX queue")
		if target, err := os.Readlink(tr.path(tr.nic.queueRel("tx", 0, "xps_cpus"))); err != nil || target != unreadable {
			t.Errorf("tx-0/xps_cpus was touched: %q, %v", target, err)
		}
	})
	t.Run("--no-xps leaves it alone", func(t *testing.T) {
		t.Parallel()
		tr := newTree(t, mlx5Host())
		r := tr.run(t, "--cpus", "0-3", "--no-xps")
		wantCode(t, r, exitOK)
		for q := range 4 {
			wantFile(t, tr, tr.nic.queueRel("tx", q, "xps_cpus"), "0")
		}
	})
}

func TestApplyFewerQueuesThanLoops(t *testing.T) {
	t.Parallel()
	h := mlx5Host()
	h.nic.MaxCombined = 2
	tr := newTree(t, h)
	r := tr.run(t, "--cpus", "3,2,1,0")
	wantCode(t, r, exitOK)
	wantOutput(t, r, "gap: queues: 4 loops, but eth0 has at most 2")
	if !slices.Contains(tr.calls(t), "ethtool -L eth0 combined 2") {
		t.Errorf("not resized to the 2 queues there are")
	}
	n := tr.model(t)
	for q, c := range []int{3, 2} {
		wantFile(t, tr, affinity(n.queueIRQs(q)[0]), mask(c))
		wantFile(t, tr, n.queueRel("tx", q, "xps_cpus"), mask(c))
		wantFile(t, tr, n.queueRel("rx", q, "rps_cpus"), mask(0, 1, 2, 3))
		wantFile(t, tr, n.queueRel("rx", q, "rps_flow_cnt"), "16384")
	}
}

func TestApplyMasksBeyond64CPUs(t *testing.T) {
	t.Parallel()
	loops := []int{64, 95, 0, 33}
	want := []string{"00000001,00000000,00000000", "80000000,00000000,00000000", "00000001", "00000002,00000000"}
	t.Run("IRQ and XPS masks", func(t *testing.T) {
		t.Parallel()
		h := intelHost()
		h.nic.CPUs = 96
		h.preset = nil
		tr := newTree(t, h)
		wantCode(t, tr.run(t, "--cpus", "64,95,0,33"), exitOK)
		for q := range loops {
			wantFile(t, tr, affinity(h.nic.queueIRQs(q)[0]), want[q])
			wantFile(t, tr, h.nic.queueRel("tx", q, "xps_cpus"), want[q])
		}
	})
	t.Run("RPS mask over the loops", func(t *testing.T) {
		t.Parallel()
		h := vethHost()
		h.nic.CPUs = 96
		tr := newTree(t, h)
		wantCode(t, tr.run(t, "--cpus", "64,95,0,33"), exitOK)
		for q := range loops {
			wantFile(t, tr, h.nic.queueRel("rx", q, "rps_cpus"), "80000001,00000002,00000001")
		}
	})
	t.Run("CPU 32 and the check that reads kernel-width masks back", func(t *testing.T) {
		t.Parallel()
		h := intelHost()
		h.nic.CPUs = 72
		h.preset = nil
		tr := newTree(t, h)
		wantCode(t, tr.run(t, "--cpus", "32,31,71,1"), exitOK)
		wantFile(t, tr, affinity(h.nic.queueIRQs(0)[0]), "00000001,00000000")
		wantFile(t, tr, affinity(h.nic.queueIRQs(1)[0]), "80000000")
		wantFile(t, tr, affinity(h.nic.queueIRQs(2)[0]), "00000080,00000000,00000000")
		r := tr.run(t, "--cpus", "32,31,71,1")
		wantOutput(t, r, "nothing to change")
	})
}

func TestApplyIrqbalance(t *testing.T) {
	t.Parallel()
	mlx5 := mlx5Host()
	t.Run("ban, restart and restore", func(t *testing.T) {
		t.Parallel()
		tr := newTree(t, mlx5)
		orig := tr.read(t, "etc/default/irqbalance")
		r := tr.run(t, "--cpus", "0-3")
		wantCode(t, r, exitOK)
		n := tr.model(t)
		want := `IRQBALANCE_ARGS="--banirq=5`
		for q := range 4 {
			want += fmt.Sprintf(" --banirq=%d", n.queueIRQs(q)[0])
		}
		want += `"`
		conf := tr.read(t, "etc/default/irqbalance")
		if !slices.Contains(strings.Split(conf, "\n"), want) || !strings.HasPrefix(conf, "# Configuration for the irqbalance daemon\n#IRQBALANCE_ONESHOT=\n") {
			t.Errorf("config:\n%s\nwant the line %s", conf, want)
		}
		calls := mutating(tr.calls(t))
		if !slices.Contains(calls, "systemctl restart irqbalance") {
			t.Errorf("irqbalance was not restarted: %q", calls)
		}
		// The pins come after the restart, so irqbalance starts with the bans.
		r = tr.run(t, "--restore")
		wantCode(t, r, exitOK)
		if got := tr.read(t, "etc/default/irqbalance"); got != orig {
			t.Errorf("restored config:\n%s\nwant:\n%s", got, orig)
		}
		if calls := mutating(tr.calls(t)); !slices.Contains(calls, "systemctl restart irqbalance") {
			t.Errorf("irqbalance was not restarted after the restore: %q", calls)
		}
	})
	t.Run("ban appends a line when there is none", func(t *testing.T) {
		t.Parallel()
		h := mlx5Host()
		h.conf = "#IRQBALANCE_ARGS=\n"
		tr := newTree(t, h)
		wantCode(t, tr.run(t, "--cpus", "0"), exitOK)
		irq := tr.model(t).queueIRQs(0)[0]
		wantFile(t, tr, "etc/default/irqbalance", fmt.Sprintf("#IRQBALANCE_ARGS=\nIRQBALANCE_ARGS=\"--banirq=%d\"", irq))
	})
	t.Run("ban in the RHEL config", func(t *testing.T) {
		t.Parallel()
		h := mlx5Host()
		h.conf = ""
		tr := newTree(t, h)
		if err := writeFile(tr.path("etc/sysconfig/irqbalance"), "IRQBALANCE_ARGS=\n"); err != nil {
			t.Fatal(err)
		}
		wantCode(t, tr.run(t, "--cpus", "0"), exitOK)
		wantFile(t, tr, "etc/sysconfig/irqbalance", fmt.Sprintf("IRQBALANCE_ARGS=\"--banirq=%d\"", tr.model(t).queueIRQs(0)[0]))
	})
	t.Run("stop and restore starts it", func(t *testing.T) {
		t.Parallel()
		tr := newTree(t, mlx5)
		before := tr.read(t, "etc/default/irqbalance")
		wantCode(t, tr.run(t, "--cpus", "0-3", "--irqbalance", "stop"), exitOK)
		if tr.model(t).Irqbalance {
			t.Errorf("irqbalance still runs")
		}
		wantFile(t, tr, "etc/default/irqbalance", before)
		if calls := mutating(tr.calls(t)); !slices.Contains(calls, "systemctl stop irqbalance") {
			t.Errorf("calls %q", calls)
		}
		wantCode(t, tr.run(t, "--restore"), exitOK)
		if !tr.model(t).Irqbalance {
			t.Errorf("irqbalance was not started again")
		}
	})
	t.Run("ignore is a gap", func(t *testing.T) {
		t.Parallel()
		tr := newTree(t, mlx5)
		before := tr.read(t, "etc/default/irqbalance")
		r := tr.run(t, "--cpus", "0-3", "--irqbalance", "ignore")
		wantCode(t, r, exitOK)
		wantOutput(t, r, "gap: irqbalance: running and left alone")
		wantFile(t, tr, "etc/default/irqbalance", before)
		for _, c := range mutating(tr.calls(t)) {
			if strings.HasPrefix(c, "systemctl") {
				t.Errorf("ran %q", c)
			}
		}
	})
	t.Run("not running is left alone", func(t *testing.T) {
		t.Parallel()
		h := mlx5Host()
		h.nic.Irqbalance = false
		tr := newTree(t, h)
		before := tr.read(t, "etc/default/irqbalance")
		wantCode(t, tr.run(t, "--cpus", "0-3"), exitOK)
		wantFile(t, tr, "etc/default/irqbalance", before)
	})
}

// hosts are the four NIC styles with two loop lists each, for the tests that run every style.
var hosts = []struct {
	name         string
	host         func() host
	first, other string
}{
	{"mlx5", mlx5Host, "0-3", "1,0"},
	{"intel", intelHost, "0-3", "3,2"},
	{"virtio", virtioHost, "0,1", "1"},
	{"veth", vethHost, "0-3", "2,0,1"},
}

func TestApplyIsIdempotent(t *testing.T) {
	t.Parallel()
	for _, hh := range hosts {
		t.Run(hh.name, func(t *testing.T) {
			t.Parallel()
			tr := newTree(t, hh.host())
			wantCode(t, tr.run(t, "--cpus", hh.first), exitOK)
			tr.calls(t)
			sum := tr.sum(t, true)
			state, err := os.ReadFile(tr.stateFile())
			if err != nil {
				t.Fatalf("no state after the first apply: %v", err)
			}
			r := tr.run(t, "--cpus", hh.first)
			wantCode(t, r, exitOK)
			wantOutput(t, r, "nothing to change")
			if strings.Contains(r.stdout, "write ") || strings.Contains(r.stdout, "run: ") {
				t.Errorf("the second run changed something:\n%s", r)
			}
			tr.wantUnchanged(t, "the second run", sum)
			if again, _ := os.ReadFile(tr.stateFile()); !bytes.Equal(again, state) {
				t.Errorf("the second run changed the state file:\n%s\nwas:\n%s", again, state)
			}
		})
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	for _, hh := range hosts {
		t.Run(hh.name, func(t *testing.T) {
			t.Parallel()
			tr := newTree(t, hh.host())
			sum := tr.sum(t, true)
			r := tr.run(t, "--cpus", hh.other, "--dry-run")
			wantCode(t, r, exitOK)
			wantOutput(t, r, "would write ", " (now ", "dry run: ")
			tr.wantUnchanged(t, "the dry run", sum)
			if _, err := os.Stat(tr.stateDir()); err == nil {
				t.Errorf("the dry run created %s", tr.stateDir())
			}
			// Every "would" line is one change, and the summary counts them.
			n := 0
			for _, l := range strings.Split(r.stdout, "\n") {
				if strings.HasPrefix(l, "would ") {
					n++
				}
			}
			if !strings.Contains(r.stdout, fmt.Sprintf("dry run: %d changes would be made", n)) {
				t.Errorf("the summary does not count the %d changes listed:\n%s", n, r)
			}
		})
	}
	t.Run("resize is shown", func(t *testing.T) {
		t.Parallel()
		tr := newTree(t, mlx5Host())
		r := tr.run(t, "--cpus", "0-3", "--dry-run")
		wantOutput(t, r, "would run: "+tr.path("bin/ethtool")+" -L eth0 combined 4 (now combined 8)",
			"would write 32768 > "+tr.path("proc/sys/net/core/rps_sock_flow_entries")+" (now 0)",
			"would pin the IRQs of queue 3 (numbered by the resize) to CPU 3: 00000008",
			"would run: "+tr.path("bin/ethtool")+" -K eth0 ntuple on (now ntuple off)")
	})
	t.Run("restore", func(t *testing.T) {
		t.Parallel()
		tr := newTree(t, mlx5Host())
		wantCode(t, tr.run(t, "--cpus", "0-3"), exitOK)
		tr.calls(t)
		sum := tr.sum(t, true)
		r := tr.run(t, "--restore", "--dry-run")
		wantCode(t, r, exitOK)
		wantOutput(t, r, "would run: "+tr.path("bin/ethtool")+" -L eth0 combined 8 (now combined 4)", "would write 0 > ")
		tr.wantUnchanged(t, "the dry restore", sum)
		if _, err := os.Stat(tr.stateFile()); err != nil {
			t.Errorf("the dry restore removed the state: %v", err)
		}
	})
}

func TestRestoreAfterTwoApplies(t *testing.T) {
	t.Parallel()
	for _, hh := range hosts {
		t.Run(hh.name, func(t *testing.T) {
			t.Parallel()
			tr := newTree(t, hh.host())
			orig := tr.sum(t, false)
			wantCode(t, tr.run(t, "--cpus", hh.first), exitOK)
			wantCode(t, tr.run(t, "--cpus", hh.other, "--flow-entries", "65536"), exitOK)
			if tr.sum(t, false) == orig {
				t.Fatalf("the applies changed nothing")
			}
			r := tr.run(t, "--restore")
			wantCode(t, r, exitOK)
			if got := tr.sum(t, false); got != orig {
				t.Errorf("the tree differs from the original after restore:\n%s", r)
			}
			if _, err := os.Stat(tr.stateFile()); err == nil {
				t.Errorf("restore left %s", tr.stateFile())
			}
			if left, _ := filepath.Glob(filepath.Join(tr.stateDir(), "*")); len(left) > 0 {
				t.Errorf("restore left %q", left)
			}
			r = tr.run(t, "--restore")
			wantCode(t, r, exitOK)
			wantOutput(t, r, "nothing to restore")
		})
	}
}

// TestConcurrentRunsAreKeptApart holds the state directory's lock, as a
// running apply does, and checks that apply and restore refuse at once and
// change nothing, and that they work once it is released.
func TestConcurrentRunsAreKeptApart(t *testing.T) {
	t.Parallel()
	hh := hosts[0]
	tr := newTree(t, hh.host())
	wantCode(t, tr.run(t, "--cpus", hh.first), exitOK)
	applied := tr.sum(t, true)
	state, err := os.ReadFile(tr.stateFile())
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.Open(tr.stateDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	if err := unix.Flock(int(dir.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--cpus", hh.other}, {"--restore"}} {
		r := tr.run(t, args...)
		wantCode(t, r, exitLocked)
		wantOutput(t, r, "another apply or restore is running", "nothing was changed")
		if tr.sum(t, true) != applied {
			t.Errorf("%q changed the tree while another run held the lock", args)
		}
		if again, _ := os.ReadFile(tr.stateFile()); !bytes.Equal(again, state) {
			t.Errorf("%q changed the state file while another run held the lock", args)
		}
	}
	// A dry run takes no lock.
	wantCode(t, tr.run(t, "--cpus", hh.other, "--dry-run"), exitOK)
	if err := unix.Flock(int(dir.Fd()), unix.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	wantCode(t, tr.run(t, "--restore"), exitOK)
}

func TestManagedIRQIsAGap(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(managedAffinity); err != nil {
		t.Skipf("needs %s to model an IRQ that refuses affinity writes: %v", managedAffinity, err)
	}
	h := intelHost()
	h.nic.Managed = []int{1}
	h.preset = nil
	tr := newTree(t, h)
	orig := tr.sum(t, false)
	r := tr.run(t, "--cpus", "0-3")
	wantCode(t, r, exitOK)
	wantOutput(t, r, fmt.Sprintf("gap: irq %d (queue 1): the kernel refused affinity 00000002", h.nic.queueIRQs(1)[0]))
	for _, q := range []int{0, 2, 3} {
		wantFile(t, tr, affinity(h.nic.queueIRQs(q)[0]), mask(q))
	}
	state, err := os.ReadFile(tr.stateFile())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(state), affinity(h.nic.queueIRQs(1)[0])) {
		t.Errorf("the refused write is in the state file:\n%s", state)
	}
	wantCode(t, tr.run(t, "--restore"), exitOK)
	if tr.sum(t, false) != orig {
		t.Errorf("restore did not return the tree to the original")
	}
}

func TestFailedStepExits3AndRestores(t *testing.T) {
	t.Parallel()
	h := mlx5Host()
	h.nic.NtupleFails = true
	tr := newTree(t, h)
	orig := tr.sum(t, false)
	r := tr.run(t, "--cpus", "0-3")
	wantCode(t, r, exitStepErr)
	wantOutput(t, r, "turn ntuple on", "Device or resource busy", "--restore --dev eth0")
	if _, err := os.Stat(tr.stateFile()); err != nil {
		t.Fatalf("no state file after a failed step: %v", err)
	}
	if rx, _ := tr.model(t).queues(); rx != 4 {
		t.Fatalf("the resize before the failure did not happen")
	}
	r = tr.run(t, "--restore", "--dev", "eth0")
	wantCode(t, r, exitOK)
	if tr.sum(t, false) != orig {
		t.Errorf("restore after the failure did not return the tree to the original:\n%s", r)
	}
}

func TestDefaultDeviceIsTheDefaultRoute(t *testing.T) {
	t.Parallel()
	tr := newTree(t, intelHost())
	r := tr.run(t, "--check")
	wantCode(t, r, exitOK)
	wantOutput(t, r, "device: eth1")
}
