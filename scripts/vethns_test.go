package scripts_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestVethInNamespace runs tune-nic.sh with the real ethtool and sysfs against a 4-queue veth in
// a network namespace of its own: check reports the gaps, apply resizes the veth to the loops and
// sets the flow tables, RPS and XPS, a second apply changes nothing, and restore brings back the
// 4 queues and their values. Veth has no IRQs and ntuple is fixed off, so this is the software
// recipe; the namespace also hides the global rps_sock_flow_entries.
func TestVethInNamespace(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skipf("needs root to create a network namespace (running as uid %d)", os.Geteuid())
	}
	for _, tool := range []string{"ip", "ethtool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (apt-get install -y iproute2 ethtool): %v", tool, err)
		}
	}
	online := onlineCPUs(t)
	loops := online[:min(2, len(online))]

	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	ns := "percore-test-" + hex.EncodeToString(b[:])
	if out, err := command(t, "ip", "netns", "add", ns); err != nil {
		t.Skipf("cannot create the network namespace %s: %v: %s", ns, err, out)
	}
	t.Cleanup(func() {
		if out, err := command(t, "ip", "netns", "del", ns); err != nil {
			t.Errorf("remove the network namespace %s: %v: %s", ns, err, out)
		}
	})
	inNS := func(args ...string) (string, error) {
		return command(t, append([]string{"ip", "netns", "exec", ns}, args...)...)
	}
	const dev = "pc0"
	if out, err := inNS("ip", "link", "add", dev, "numtxqueues", "4", "numrxqueues", "4", "type", "veth",
		"peer", "name", "pc1", "numtxqueues", "4", "numrxqueues", "4"); err != nil {
		t.Skipf("cannot create a 4-queue veth in %s: %v: %s", ns, err, out)
	}

	stateDir := t.TempDir()
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"LC_ALL=C",
		"TUNE_NIC_STATE_DIR=" + stateDir, // not /run
		"TUNE_NIC_ETC=" + t.TempDir(),    // veth has no IRQs to ban, but never touch the host's /etc
	}
	prefix := []string{"ip", "netns", "exec", ns}
	run := func(args ...string) result {
		t.Helper()
		return runScript(t, env, prefix, args...)
	}
	stateFile := filepath.Join(stateDir, dev+".state")
	t.Cleanup(func() {
		if _, err := os.Stat(stateFile); err == nil {
			run("--restore", "--dev", dev)
		}
	})
	read := func(rel string) string {
		t.Helper()
		out, err := inNS("cat", "/sys/class/net/"+dev+"/queues/"+rel)
		if err != nil {
			t.Fatalf("read %s: %v: %s", rel, err, out)
		}
		return strings.TrimSpace(out)
	}
	channels := func() (rx, tx int) {
		t.Helper()
		out, err := inNS("ethtool", "-l", dev)
		if err != nil {
			t.Fatalf("ethtool -l %s: %v: %s", dev, err, out)
		}
		_, cur, _ := strings.Cut(out, "Current hardware settings:")
		for _, l := range strings.Split(cur, "\n") {
			k, v, _ := strings.Cut(l, ":")
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			switch k {
			case "RX":
				rx = n
			case "TX":
				tx = n
			}
		}
		return rx, tx
	}
	files := func(queues int) map[string]string {
		m := map[string]string{}
		for q := range queues {
			for _, f := range []string{fmt.Sprintf("rx-%d/rps_cpus", q), fmt.Sprintf("rx-%d/rps_flow_cnt", q), fmt.Sprintf("tx-%d/xps_cpus", q)} {
				m[f] = read(f)
			}
		}
		return m
	}
	before := files(4)
	list := strings.Trim(strings.ReplaceAll(fmt.Sprint(loops), " ", ","), "[]")

	r := run("--check", "--dev", dev, "--cpus", list)
	wantCode(t, r, exitGaps)
	wantOutput(t, r, "driver: veth", "gap: irqs: no per-queue IRQs found for pc0", "gap: ntuple: fixed off on pc0")

	r = run("--dev", dev, "--cpus", list)
	wantCode(t, r, exitOK)
	if rx, tx := channels(); rx != len(loops) || tx != len(loops) {
		t.Fatalf("after apply rx %d tx %d, want %d each:\n%s", rx, tx, len(loops), r)
	}
	// The global table is not visible in a child namespace, so the queues share the default
	// request; where it is visible, they share what apply raised it to.
	entries := 32768
	if !strings.Contains(r.stdout, "gap: rps_sock_flow_entries: not visible here") {
		out, err := inNS("cat", "/proc/sys/net/core/rps_sock_flow_entries")
		if err != nil {
			t.Fatalf("read rps_sock_flow_entries: %v: %s", err, out)
		}
		if entries, err = strconv.Atoi(strings.TrimSpace(out)); err != nil {
			t.Fatalf("parse rps_sock_flow_entries: %v", err)
		}
	}
	per := 1
	for per < (entries+len(loops)-1)/len(loops) {
		per *= 2
	}
	applied := files(len(loops))
	for q, c := range loops {
		if got := applied[fmt.Sprintf("rx-%d/rps_flow_cnt", q)]; got != strconv.Itoa(per) {
			t.Errorf("rx-%d/rps_flow_cnt = %s, want %d", q, got, per)
		}
		if got := applied[fmt.Sprintf("rx-%d/rps_cpus", q)]; normMask(got) != normMask(mask(loops...)) {
			t.Errorf("rx-%d/rps_cpus = %s, want the loops' mask %s", q, got, mask(loops...))
		}
		if got := applied[fmt.Sprintf("tx-%d/xps_cpus", q)]; normMask(got) != normMask(mask(c)) {
			t.Errorf("tx-%d/xps_cpus = %s, want %s", q, got, mask(c))
		}
	}

	r = run("--dev", dev, "--cpus", list)
	wantCode(t, r, exitOK)
	wantOutput(t, r, "nothing to change")
	if again := files(len(loops)); fmt.Sprint(again) != fmt.Sprint(applied) {
		t.Errorf("the second apply changed the values:\n%v\nwas\n%v", again, applied)
	}

	r = run("--restore", "--dev", dev)
	wantCode(t, r, exitOK)
	if rx, tx := channels(); rx != 4 || tx != 4 {
		t.Errorf("after restore rx %d tx %d, want 4 each:\n%s", rx, tx, r)
	}
	if after := files(4); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("after restore:\n%v\nwant the original\n%v", after, before)
	}
	if _, err := os.Stat(stateFile); err == nil {
		t.Errorf("restore left %s", stateFile)
	}
}

// command runs a command bounded by scriptTimeout and returns its combined output.
func command(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// onlineCPUs returns the host's online CPUs, from the kernel list format.
func onlineCPUs(t *testing.T) []int {
	t.Helper()
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Skipf("needs /sys/devices/system/cpu/online: %v", err)
	}
	var cpus []int
	for _, part := range strings.Split(strings.TrimSpace(string(b)), ",") {
		lo, hi, found := strings.Cut(part, "-")
		if !found {
			hi = lo
		}
		l, err1 := strconv.Atoi(lo)
		h, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil {
			t.Fatalf("parse the online CPUs %q", b)
		}
		for c := l; c <= h; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus
}
