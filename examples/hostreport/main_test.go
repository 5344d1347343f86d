package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/percore/percore/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// fakeProc writes a /proc tree with somaxconn, two IRQs pinned to cpu 1 and
// one spread over cpus 0-1.
func fakeProc(t *testing.T, somaxconn string) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"sys/net/core/somaxconn":   somaxconn + "\n",
		"irq/30/smp_affinity":      "00000002\n",
		"irq/31/smp_affinity":      "2\n",
		"irq/32/smp_affinity":      "00000003\n",
		"irq/default_smp_affinity": "3\n",
		"interrupts": "           CPU0       CPU1\n" +
			"  30:         10          0   PCI-MSIX-0000:00:03.0   0-edge      virtio0-input.0\n" +
			"  31:          0         20   PCI-MSIX-0000:00:03.0   1-edge      virtio0-output.0\n" +
			"  32:          5          5   IO-APIC    4-edge      ttyS0\n" +
			"NMI:          0          0   Non-maskable interrupts\n",
	}
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// fakeScript writes a tune-nic.sh stand-in that prints stdout, writes
// stderr and exits with status.
func fakeScript(t *testing.T, stdout, stderr string, status int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tune-nic.sh")
	body := "#!/bin/sh\nprintf '%s' '" + stdout + "'\nprintf '%s' '" + stderr + "' >&2\nexit " + string(rune('0'+status)) + "\n"
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// runJSON runs the command with -json and decodes its report.
func runJSON(t *testing.T, o options) (r reportJSON, status int) {
	t.Helper()
	o.json = true
	var out, errs bytes.Buffer
	status = run(o, &out, &errs)
	if status == exitError {
		t.Fatalf("exit 1: %s", errs.String())
	}
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("the -json output does not parse: %v\n%s", err, out.String())
	}
	if r.Exit != status {
		t.Errorf("the report says exit %d, the command exited %d", r.Exit, status)
	}
	return r, status
}

// reportJSON is the report as a deploy script would read it.
type reportJSON struct {
	IOURing struct {
		Available bool `json:"available"`
	} `json:"io_uring"`
	Backend   string `json:"backend"`
	Somaxconn int    `json:"somaxconn"`
	CPUs      []struct {
		CPU        int    `json:"cpu"`
		IRQMask    string `json:"irq_mask"`
		PinnedIRQs []struct {
			IRQ  int    `json:"irq"`
			Name string `json:"name"`
		} `json:"pinned_irqs"`
	} `json:"cpus"`
	NIC struct {
		Checked bool     `json:"checked"`
		Exit    int      `json:"exit"`
		Gaps    []string `json:"gaps"`
	} `json:"nic"`
	Warnings []string `json:"warnings"`
	Exit     int      `json:"exit"`
}

func hasWarning(r reportJSON, part string) bool {
	for _, w := range r.Warnings {
		if strings.Contains(w, part) {
			return true
		}
	}
	return false
}

func TestNICCheck(t *testing.T) {
	gaps := `{"applies":false,"gaps":[{"reason":"ntuple: fixed off on eth0","instead":"RFS in software"}]}`
	for _, tc := range []struct {
		name    string
		script  func(t *testing.T) string
		checked bool
		warning string // "" for no NIC warning
	}{
		{"applies", func(t *testing.T) string { return fakeScript(t, `{"applies":true,"gaps":[]}`, "", 0) }, true, ""},
		{"gaps", func(t *testing.T) string { return fakeScript(t, gaps, "", 2) }, true, "ntuple: fixed off on eth0"},
		{"cannot check", func(t *testing.T) string { return fakeScript(t, "", "tune-nic.sh: no default route", 1) }, true, "no default route"},
		{"missing", func(t *testing.T) string { return filepath.Join(t.TempDir(), "tune-nic.sh") }, false, "not found"},
		{"skipped", func(*testing.T) string { return "" }, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := runJSON(t, options{cores: "0", tuneNIC: tc.script(t), proc: fakeProc(t, "4096")})
			if r.NIC.Checked != tc.checked {
				t.Errorf("checked = %v, want %v", r.NIC.Checked, tc.checked)
			}
			nicWarned := hasWarning(r, "tune-nic.sh") || hasWarning(r, "NIC")
			if tc.warning == "" && nicWarned {
				t.Errorf("a NIC warning: %q", r.Warnings)
			}
			if tc.warning != "" && !hasWarning(r, tc.warning) {
				t.Errorf("no warning with %q: %q", tc.warning, r.Warnings)
			}
		})
	}
}

func TestHostFacts(t *testing.T) {
	r, status := runJSON(t, options{cores: "0-1", proc: fakeProc(t, "128")})
	if r.Somaxconn != 128 || !hasWarning(r, "somaxconn is 128") {
		t.Errorf("somaxconn %d, warnings %q: want 128 and a warning", r.Somaxconn, r.Warnings)
	}
	if want := exitStatus(r.IOURing.Available, 1); status != want {
		t.Errorf("exit %d with a warning, want %d", status, want)
	}
	if len(r.CPUs) != 2 {
		t.Fatalf("cpus %+v, want 0 and 1", r.CPUs)
	}
	if c := r.CPUs[0]; c.CPU != 0 || c.IRQMask != "00000001" || len(c.PinnedIRQs) != 0 {
		t.Errorf("cpu 0: %+v, want mask 00000001 and no IRQ pinned to it alone", c)
	}
	c := r.CPUs[1]
	if c.CPU != 1 || len(c.PinnedIRQs) != 2 || c.PinnedIRQs[0].IRQ != 30 || c.PinnedIRQs[0].Name != "virtio0-input.0" ||
		c.PinnedIRQs[1].IRQ != 31 {
		t.Errorf("cpu 1: %+v, want IRQs 30 (virtio0-input.0) and 31", c)
	}
	if r.Backend != "io_uring" && r.Backend != "epoll" {
		t.Errorf("backend %q", r.Backend)
	}
}

func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		uring    bool
		warnings int
		want     int
	}{
		{true, 0, 0},
		{true, 1, 2},
		{false, 0, 3},
		{false, 2, 3},
	} {
		if got := exitStatus(tc.uring, tc.warnings); got != tc.want {
			t.Errorf("exitStatus(%v, %d) = %d, want %d", tc.uring, tc.warnings, got, tc.want)
		}
	}
}

func TestText(t *testing.T) {
	var out, errs bytes.Buffer
	status := run(options{cores: "0", proc: fakeProc(t, "4096")}, &out, &errs)
	if status == exitError {
		t.Fatalf("exit 1: %s", errs.String())
	}
	for _, want := range []string{"kernel:", "io_uring:", "backend:", "nofile:", "memlock:", "somaxconn:  4096", "cpu 0", "verdict:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBadCores(t *testing.T) {
	var out, errs bytes.Buffer
	if got := run(options{cores: "x"}, &out, &errs); got != exitError {
		t.Errorf("exit %d for -cores x, want 1", got)
	}
}
