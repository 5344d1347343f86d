package scripts_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// This file builds the fake hosts the hermetic tests run tune-nic.sh against: a /sys, /proc and
// /etc tree under t.TempDir() for one NIC, and a fake ethtool and systemctl
// (testdata/fake-ethtool, testdata/fake-systemctl). The fakes record their calls and answer
// queries from the NIC model in <root>/fake/nic.env; for changes they run this test binary
// through the symlink bin/fakenic (TestMain dispatches on the name), so the model and the tree
// layout live in one place: ethtool -L changes the model and lays the queues and IRQs out again
// the way the kernel does (queues it removes lose their RPS and XPS settings, new ones start at
// the defaults, mlx5 IRQs are renumbered).

// fakeRootEnv names the environment variable that tells the fake commands where the tree is.
const fakeRootEnv = "PERCORE_FAKE_ROOT"

// unreadable is where a single-queue device's xps_cpus points: a dangling symlink is listed by ls
// but reading it fails with ENOENT, as the kernel's xps_cpus does when there is one TX queue.
const unreadable = "/nonexistent-percore-tune-nic-test/xps_cpus"

// managedAffinity is where the smp_affinity of a kernel-managed IRQ points: a file that reads but
// refuses every write, even root's (a 0444 sysctl), as a managed IRQ's affinity does.
const managedAffinity = "/proc/sys/kernel/ostype"

// nic is the model of a fake NIC, kept by the fake ethtool in <root>/fake/nic.json.
type nic struct {
	Dev    string // interface name
	Driver string // what ethtool -i reports
	Style  string // mlx5, intel, virtio or veth: how its IRQs are named and laid out
	Bus    string // PCI function that owns the IRQs; empty for veth
	Virtio string // virtio device name (virtio0) for the virtio style
	CPUs   int    // CPUs the kernel has (masks are printed this wide)

	IRQBase     int
	MaxCombined int // 0: the device has separate rx and tx channels
	Combined    int
	MaxRX       int
	MaxTX       int
	RX          int
	TX          int

	Ntuple      string // "off", "on", "off [fixed]"; empty: no ntuple-filters line
	NtupleFails bool   // ethtool -K ntuple fails although the feature looks settable
	Irqbalance  bool   // irqbalance is running (systemctl is-active)
	Managed     []int  // queues whose IRQs refuse affinity writes
}

// irq is one interrupt vector of the fake NIC.
type irq struct {
	num   int
	name  string
	queue int // -1 for vectors that serve no queue
}

// queues returns the current rx and tx queue counts.
func (n *nic) queues() (rx, tx int) {
	if n.MaxCombined > 0 {
		return n.Combined, n.Combined
	}
	return n.RX, n.TX
}

// singleTX reports whether the device has only one TX queue at all, which makes its xps_cpus
// unreadable.
func (n *nic) singleTX() bool {
	if n.MaxCombined > 0 {
		return n.MaxCombined == 1
	}
	return n.MaxTX == 1
}

// irqs returns the vectors of the NIC at its current queue count. mlx5 numbers its completion
// vectors by the channel count, so a resize renumbers them; the others keep their numbers.
func (n *nic) irqs() []irq {
	q, _ := n.queues()
	var v []irq
	switch n.Style {
	case "mlx5":
		v = append(v, irq{n.IRQBase, "mlx5_async0@pci:" + n.Bus, -1})
		for i := range q {
			v = append(v, irq{n.IRQBase + 1 + 64*q + i, fmt.Sprintf("mlx5_comp%d@pci:%s", i, n.Bus), i})
		}
	case "intel":
		v = append(v, irq{n.IRQBase, n.Dev, -1})
		for i := range q {
			v = append(v, irq{n.IRQBase + 1 + i, fmt.Sprintf("%s-TxRx-%d", n.Dev, i), i})
		}
		v = append(v, irq{n.IRQBase + 90, "i40e-" + n.Dev + "-fdir-TxRx-0", -1})
	case "virtio":
		v = append(v, irq{n.IRQBase, n.Virtio + "-config", -1})
		for i := range q {
			v = append(v, irq{n.IRQBase + 1 + 2*i, fmt.Sprintf("%s-input.%d", n.Virtio, i), i})
			v = append(v, irq{n.IRQBase + 2 + 2*i, fmt.Sprintf("%s-output.%d", n.Virtio, i), i})
		}
	}
	return v
}

// queueIRQs returns the numbers of the vectors that serve queue q.
func (n *nic) queueIRQs(q int) []int {
	var v []int
	for _, i := range n.irqs() {
		if i.queue == q {
			v = append(v, i.num)
		}
	}
	return v
}

// otherIRQs are vectors of other devices on the fake host; the script must leave them alone.
// eth10's name starts with eth1's, and it is not in eth1's msi_irqs.
var otherIRQs = []irq{{0, "timer", -1}, {1, "i8042", -1}, {200, "eth10-TxRx-0", -1}, {201, "nvme0q1", -1}}

// host is a fake machine: one NIC and what the rest of the tree holds.
type host struct {
	nic        nic
	online     string            // sys/devices/system/cpu/online; default 0-(CPUs-1)
	noGlobal   bool              // no rps_sock_flow_entries (a child network namespace)
	global     int               // rps_sock_flow_entries
	conf       string            // etc/default/irqbalance; empty: none
	routes     []string          // devices of the default routes; default: the NIC
	noRoute    bool              // no default route at all
	preset     map[string]string // files (relative to the root) to write after the build
	irqbalance bool              // irqbalance running
}

// The four NIC styles the tests use. Each call returns a fresh value.

func mlx5Host() host {
	return host{
		nic: nic{Dev: "eth0", Driver: "mlx5_core", Style: "mlx5", Bus: "0000:3b:00.0", CPUs: 4,
			IRQBase: 100, MaxCombined: 16, Combined: 8, Ntuple: "off", Irqbalance: true},
		conf: "# Configuration for the irqbalance daemon\n#IRQBALANCE_ONESHOT=\nIRQBALANCE_ARGS=\"--banirq=5\"\n",
	}
}

func intelHost() host {
	h := host{
		nic: nic{Dev: "eth1", Driver: "ixgbe", Style: "intel", Bus: "0000:01:00.1", CPUs: 4,
			IRQBase: 40, MaxCombined: 8, Combined: 4, Ntuple: "off"},
	}
	// Queues 0 and 1 start pinned the other way round; restore must bring that back.
	h.preset = map[string]string{
		"proc/irq/41/smp_affinity": "8\n",
		"proc/irq/42/smp_affinity": "4\n",
	}
	return h
}

func virtioHost() host {
	return host{
		nic: nic{Dev: "ens3", Driver: "virtio_net", Style: "virtio", Bus: "0000:00:03.0", Virtio: "virtio0",
			CPUs: 2, IRQBase: 24, MaxCombined: 1, Combined: 1, Ntuple: "off [fixed]"},
	}
}

func vethHost() host {
	return host{
		nic:      nic{Dev: "veth0", Driver: "veth", Style: "veth", CPUs: 4, MaxRX: 4, MaxTX: 4, RX: 4, TX: 4, Ntuple: "off [fixed]"},
		noGlobal: true,
	}
}

// tree is a fake host laid out under root.
type tree struct {
	root string
	nic  nic
}

func (tr *tree) path(rel string) string { return filepath.Join(tr.root, filepath.FromSlash(rel)) }

// netRel is the real sysfs directory of the NIC, relative to the root.
func (n *nic) netRel() string {
	switch n.Style {
	case "veth":
		return "sys/devices/virtual/net/" + n.Dev
	case "virtio":
		return "sys/devices/pci0000:00/" + n.Bus + "/" + n.Virtio + "/net/" + n.Dev
	default:
		return "sys/devices/pci0000:00/" + n.Bus + "/net/" + n.Dev
	}
}

// queueRel returns the sysfs path of a queue file, like queueRel("rx", 0, "rps_cpus").
func (n *nic) queueRel(kind string, q int, file string) string {
	return fmt.Sprintf("sys/class/net/%s/queues/%s-%d/%s", n.Dev, kind, q, file)
}

// newTree lays out h under a fresh t.TempDir() and returns it.
func newTree(t *testing.T, h host) *tree {
	t.Helper()
	tr := &tree{root: t.TempDir(), nic: h.nic}
	tr.nic.Irqbalance = h.nic.Irqbalance || h.irqbalance
	if err := tr.build(h); err != nil {
		t.Fatalf("build the fake tree: %v", err)
	}
	return tr
}

func (tr *tree) build(h host) error {
	n := &tr.nic
	online := h.online
	if online == "" {
		online = fmt.Sprintf("0-%d", n.CPUs-1)
	}
	files := map[string]string{
		"sys/devices/system/cpu/online": online + "\n",
		"proc/net/ipv6_route":           "",
	}
	if !h.noGlobal {
		files["proc/sys/net/core/rps_sock_flow_entries"] = strconv.Itoa(h.global) + "\n"
	}
	routes := h.routes
	if routes == nil && !h.noRoute {
		routes = []string{n.Dev}
	}
	rt := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
	for _, d := range routes {
		rt += d + "\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
		rt += d + "\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
	}
	files["proc/net/route"] = rt
	if h.conf != "" {
		files["etc/default/irqbalance"] = h.conf
	}
	netRel := n.netRel()
	files[netRel+"/type"] = "1\n"
	files[netRel+"/address"] = "02:00:00:00:00:01\n"
	for rel, v := range files {
		if err := writeFile(tr.path(rel), v); err != nil {
			return err
		}
	}
	links := map[string]string{
		"sys/class/net/" + n.Dev: "../../" + strings.TrimPrefix(netRel, "sys/"),
	}
	if n.Style != "veth" {
		busRel := "sys/devices/pci0000:00/" + n.Bus
		links[netRel+"/device"] = "../../../" + filepath.Base(filepath.Dir(filepath.Dir(netRel)))
		links[busRel+"/driver"] = "../../../bus/pci/drivers/" + n.Driver
		if err := os.MkdirAll(tr.path("sys/bus/pci/drivers/"+n.Driver), 0o755); err != nil {
			return err
		}
		if err := os.MkdirAll(tr.path(busRel+"/msi_irqs"), 0o755); err != nil {
			return err
		}
	}
	for rel, target := range links {
		if err := os.MkdirAll(filepath.Dir(tr.path(rel)), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(target, tr.path(rel)); err != nil {
			return err
		}
	}
	for _, o := range otherIRQs {
		if err := writeFile(tr.path(fmt.Sprintf("proc/irq/%d/smp_affinity", o.num)), kernelMask(n.CPUs, allCPUs(n.CPUs)...)+"\n"); err != nil {
			return err
		}
	}
	if err := n.sync(tr.root); err != nil {
		return err
	}
	for rel, v := range h.preset {
		if err := writeFile(tr.path(rel), v); err != nil {
			return err
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	bin := map[string]string{"fakenic": exe}
	for _, name := range []string{"ethtool", "systemctl"} {
		if bin[name], err = filepath.Abs("testdata/fake-" + name); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(tr.path("bin"), 0o755); err != nil {
		return err
	}
	for name, target := range bin {
		if err := os.Symlink(target, tr.path("bin/"+name)); err != nil {
			return err
		}
	}
	return n.save(tr.root)
}

// sync lays the queues and IRQs out for the model's current counts, the way the kernel does after
// ethtool -L: queues and vectors that remain keep their files, removed ones vanish, new ones start
// at the defaults.
func (n *nic) sync(root string) error {
	rx, tx := n.queues()
	qdir := filepath.Join(root, filepath.FromSlash(n.netRel()), "queues")
	zero := kernelMask(n.CPUs) + "\n"
	if err := syncQueues(qdir, "rx", rx, func(d string) error {
		if err := writeFile(filepath.Join(d, "rps_cpus"), zero); err != nil {
			return err
		}
		return writeFile(filepath.Join(d, "rps_flow_cnt"), "0\n")
	}); err != nil {
		return err
	}
	if err := syncQueues(qdir, "tx", tx, func(d string) error {
		if err := writeFile(filepath.Join(d, "tx_maxrate"), "0\n"); err != nil {
			return err
		}
		for _, f := range []string{"xps_cpus", "xps_rxqs"} {
			if n.singleTX() {
				if err := os.Symlink(unreadable, filepath.Join(d, f)); err != nil {
					return err
				}
				continue
			}
			if err := writeFile(filepath.Join(d, f), zero); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if n.Style == "veth" {
		return writeInterrupts(root, n.CPUs, otherIRQs)
	}
	want := map[int]irq{}
	for _, i := range n.irqs() {
		want[i.num] = i
	}
	msi := filepath.Join(root, "sys/devices/pci0000:00", n.Bus, "msi_irqs")
	have, err := os.ReadDir(msi)
	if err != nil {
		return err
	}
	for _, e := range have {
		num, _ := strconv.Atoi(e.Name())
		if _, ok := want[num]; ok {
			delete(want, num)
			continue
		}
		if err := os.Remove(filepath.Join(msi, e.Name())); err != nil {
			return err
		}
		if err := os.RemoveAll(filepath.Join(root, "proc/irq", e.Name())); err != nil {
			return err
		}
	}
	for num, i := range want {
		if err := writeFile(filepath.Join(msi, strconv.Itoa(num)), "msix\n"); err != nil {
			return err
		}
		aff := filepath.Join(root, "proc/irq", strconv.Itoa(num), "smp_affinity")
		if slices.Contains(n.Managed, i.queue) {
			if err := os.MkdirAll(filepath.Dir(aff), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(managedAffinity, aff); err != nil {
				return err
			}
			continue
		}
		if err := writeFile(aff, kernelMask(n.CPUs, allCPUs(n.CPUs)...)+"\n"); err != nil {
			return err
		}
	}
	return writeInterrupts(root, n.CPUs, append(slices.Clone(otherIRQs), n.irqs()...))
}

// syncQueues makes dir hold exactly the queue directories kind-0 to kind-(count-1), creating the
// missing ones with fill.
func syncQueues(dir, kind string, count int, fill func(string) error) error {
	have, _ := filepath.Glob(filepath.Join(dir, kind+"-*"))
	for _, d := range have {
		i, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), kind+"-"))
		if err != nil || i >= count {
			if err := os.RemoveAll(d); err != nil {
				return err
			}
		}
	}
	for i := range count {
		d := filepath.Join(dir, fmt.Sprintf("%s-%d", kind, i))
		if _, err := os.Lstat(d); err == nil {
			continue
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if err := fill(d); err != nil {
			return err
		}
	}
	return nil
}

// writeInterrupts writes proc/interrupts for the vectors, in the kernel's layout.
func writeInterrupts(root string, cpus int, irqs []irq) error {
	irqs = slices.Clone(irqs)
	slices.SortFunc(irqs, func(a, b irq) int { return a.num - b.num })
	var b strings.Builder
	b.WriteString("    ")
	for c := range cpus {
		fmt.Fprintf(&b, " %10s", "CPU"+strconv.Itoa(c))
	}
	b.WriteString("\n")
	for _, i := range irqs {
		fmt.Fprintf(&b, "%4d:", i.num)
		for range cpus {
			b.WriteString(" " + fmt.Sprintf("%10d", 0))
		}
		fmt.Fprintf(&b, "  IR-PCI-MSI %d-edge      %s\n", 1000+i.num, i.name)
	}
	return writeFile(filepath.Join(root, "proc/interrupts"), b.String())
}

// save writes the model as fake/nic.json, for the test binary, and as fake/nic.env, the shell
// variables the fake commands read.
func (n *nic) save(root string) error {
	b, err := json.MarshalIndent(n, "", "\t")
	if err != nil {
		return err
	}
	irqbalance := 0
	if n.Irqbalance {
		irqbalance = 1
	}
	env := fmt.Sprintf("DEV='%s'\nDRIVER='%s'\nBUS='%s'\nMAX_COMBINED=%d\nCOMBINED=%d\nMAX_RX=%d\nMAX_TX=%d\nRX=%d\nTX=%d\nNTUPLE='%s'\nIRQBALANCE=%d\n",
		n.Dev, n.Driver, n.Bus, n.MaxCombined, n.Combined, n.MaxRX, n.MaxTX, n.RX, n.TX, n.Ntuple, irqbalance)
	return errors.Join(
		writeFile(filepath.Join(root, "fake/nic.json"), string(b)+"\n"),
		writeFile(filepath.Join(root, "fake/nic.env"), env))
}

func loadNIC(root string) (*nic, error) {
	b, err := os.ReadFile(filepath.Join(root, "fake/nic.json"))
	if err != nil {
		return nil, err
	}
	var n nic
	if err := json.Unmarshal(b, &n); err != nil {
		return nil, fmt.Errorf("parse the fake NIC model: %w", err)
	}
	return &n, nil
}

func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o644)
}

func allCPUs(n int) []int {
	v := make([]int, n)
	for i := range v {
		v[i] = i
	}
	return v
}

// kernelMask formats a cpumask the way the kernel prints one for ncpu CPUs (%*pb): as many hex
// digits as ncpu bits need, in comma-separated groups of eight from the right.
func kernelMask(ncpu int, cpus ...int) string {
	s := scriptMask(ncpu-1, cpus...)
	s = strings.ReplaceAll(s, ",", "")
	s = s[len(s)-(ncpu+3)/4:]
	var groups []string
	for len(s) > 8 {
		groups = append([]string{s[len(s)-8:]}, groups...)
		s = s[:len(s)-8]
	}
	return strings.Join(append([]string{s}, groups...), ",")
}

// scriptMask formats the CPUs the way tune-nic.sh writes them: 32-bit words, most significant
// first, as many as the highest of the CPUs and width (a CPU number) need.
func scriptMask(width int, cpus ...int) string {
	high := width
	for _, c := range cpus {
		high = max(high, c)
	}
	words := make([]uint32, high/32+1)
	for _, c := range cpus {
		words[c/32] |= 1 << (c % 32)
	}
	parts := make([]string, 0, len(words))
	for i := len(words) - 1; i >= 0; i-- {
		parts = append(parts, fmt.Sprintf("%08x", words[i]))
	}
	return strings.Join(parts, ",")
}

// mask is the mask tune-nic.sh writes for the CPUs.
func mask(cpus ...int) string { return scriptMask(0, cpus...) }

// normMask drops commas and leading zeros, so that masks of different widths compare.
func normMask(m string) string {
	m = strings.TrimLeft(strings.ReplaceAll(strings.TrimSpace(m), ",", ""), "0")
	if m == "" {
		return "0"
	}
	return m
}

// ---- the fake commands ----

// runFake makes the changes the fake commands hand to this binary (started as bin/fakenic):
// "ethtool -L DEV ...", "ethtool -K DEV ntuple on|off" and "systemctl start|stop|restart
// irqbalance". It returns the exit status.
func runFake(args []string) int {
	root := os.Getenv(fakeRootEnv)
	n, err := loadNIC(root)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakenic: %v\n", err)
		return 70
	}
	switch {
	case len(args) == 3 && args[0] == "systemctl" && args[2] == "irqbalance":
		n.Irqbalance = args[1] != "stop"
	case len(args) >= 3 && args[0] == "ethtool" && args[1] == "-L" && args[2] == n.Dev:
		return fakeSetChannels(root, n, args[3:])
	case len(args) == 5 && args[0] == "ethtool" && args[1] == "-K" && args[2] == n.Dev && args[3] == "ntuple":
		if n.Ntuple == "" || strings.Contains(n.Ntuple, "[fixed]") {
			fmt.Printf("Actual changes:\nrx-ntuple-filter: off [requested %s]\n", args[4])
			fmt.Fprintln(os.Stderr, "Could not change any device features")
			return 1
		}
		if n.NtupleFails {
			fmt.Fprintln(os.Stderr, "Cannot change ntuple-filters: Device or resource busy")
			return 1
		}
		n.Ntuple = args[4]
	default:
		fmt.Fprintf(os.Stderr, "fakenic: unexpected arguments %q\n", args)
		return 1
	}
	if err := n.save(root); err != nil {
		fmt.Fprintf(os.Stderr, "fakenic: %v\n", err)
		return 70
	}
	return 0
}

func fakeSetChannels(root string, n *nic, args []string) int {
	if len(args) == 0 || len(args)%2 != 0 {
		fmt.Fprintln(os.Stderr, "ethtool: bad command line argument(s)")
		return 1
	}
	want := map[string]int{}
	for i := 0; i < len(args); i += 2 {
		v, err := strconv.Atoi(args[i+1])
		if err != nil || v < 1 {
			fmt.Fprintln(os.Stderr, "netlink error: Invalid argument")
			return 1
		}
		want[args[i]] = v
	}
	for k, v := range want {
		var limit int
		switch k {
		case "combined":
			limit = n.MaxCombined
		case "rx":
			limit = n.MaxRX
		case "tx":
			limit = n.MaxTX
		default:
			fmt.Fprintf(os.Stderr, "ethtool: bad command line argument(s): %s\n", k)
			return 1
		}
		if v > limit {
			fmt.Fprintln(os.Stderr, "netlink error: requested channel count exceeds maximum (offset 32)")
			fmt.Fprintln(os.Stderr, "netlink error: Invalid argument")
			return 1
		}
	}
	if v, ok := want["combined"]; ok {
		n.Combined = v
	}
	if v, ok := want["rx"]; ok {
		n.RX = v
	}
	if v, ok := want["tx"]; ok {
		n.TX = v
	}
	if err := errors.Join(n.sync(root), n.save(root)); err != nil {
		fmt.Fprintf(os.Stderr, "fake ethtool: %v\n", err)
		return 70
	}
	return 0
}

// ---- running the script against a tree ----

// scriptTimeout bounds every run of the script (and of each command in the root test).
const scriptTimeout = 2 * time.Minute

// result is what one run of the script printed and returned.
type result struct {
	args   []string
	stdout string
	stderr string
	code   int
}

func (r result) String() string {
	return fmt.Sprintf("tune-nic.sh %s: exit %d\n--- stdout:\n%s--- stderr:\n%s", strings.Join(r.args, " "), r.code, r.stdout, r.stderr)
}

// scriptPath returns the absolute path of tune-nic.sh (go test runs in the package directory).
func scriptPath(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("tune-nic.sh")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// stateDir is the test hook's state directory, outside the checksummed part of the tree.
func (tr *tree) stateDir() string { return tr.path("run/percore-tune-nic") }

func (tr *tree) stateFile() string { return filepath.Join(tr.stateDir(), tr.nic.Dev+".state") }

// env is the environment of a script run: only the test hooks, PATH and a C locale.
func (tr *tree) env() []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"LC_ALL=C",
		// The fake commands are this test binary; under -race it would sleep a second at exit.
		"GORACE=atexit_sleep_ms=0",
		"TUNE_NIC_SYS=" + tr.path("sys"),
		"TUNE_NIC_PROC=" + tr.path("proc"),
		"TUNE_NIC_ETC=" + tr.path("etc"),
		"TUNE_NIC_STATE_DIR=" + tr.stateDir(),
		"TUNE_NIC_ETHTOOL=" + tr.path("bin/ethtool"),
		"TUNE_NIC_SYSTEMCTL=" + tr.path("bin/systemctl"),
		fakeRootEnv + "=" + tr.root,
	}
}

// run runs the script against the tree.
func (tr *tree) run(t *testing.T, args ...string) result {
	t.Helper()
	return runScript(t, tr.env(), nil, args...)
}

// runScript runs tune-nic.sh with env, through the prefix command (like ip netns exec NS) when
// there is one, bounded by scriptTimeout.
func runScript(t *testing.T, env, prefix []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	argv := append(append(slices.Clone(prefix), "bash", scriptPath(t)), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr strings.Builder
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	r := result{args: args, stdout: stdout.String(), stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && ctx.Err() == nil:
		r.code = exit.ExitCode()
	default:
		t.Fatalf("run tune-nic.sh %s: %v\n%s", strings.Join(args, " "), err, r)
	}
	return r
}

// read returns a file of the tree without its trailing newline.
func (tr *tree) read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(tr.path(rel))
	if err != nil {
		t.Fatalf("read %s: %v", rel, err)
	}
	return strings.TrimSuffix(string(b), "\n")
}

// model returns the fake NIC's current model.
func (tr *tree) model(t *testing.T) *nic {
	t.Helper()
	n, err := loadNIC(tr.root)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// calls returns the fake commands' calls so far, one per line, and forgets them.
func (tr *tree) calls(t *testing.T) []string {
	t.Helper()
	p := tr.path("fake/calls.log")
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// wantUnchanged checks that a run, named by what for the errors, left the
// tree with the checksum sum and ran no command that changes anything.
func (tr *tree) wantUnchanged(t *testing.T, what, sum string) {
	t.Helper()
	if tr.sum(t, true) != sum {
		t.Errorf("%s changed the tree", what)
	}
	if m := mutating(tr.calls(t)); len(m) > 0 {
		t.Errorf("%s ran %q", what, m)
	}
}

// mutating returns the calls that change something: everything but ethtool's -i, -l and -k and
// systemctl is-active.
func mutating(calls []string) []string {
	var v []string
	for _, c := range calls {
		f := strings.Fields(c)
		if len(f) >= 2 && (f[0] == "ethtool" && (f[1] == "-i" || f[1] == "-l" || f[1] == "-k") || f[0] == "systemctl" && f[1] == "is-active") {
			continue
		}
		v = append(v, c)
	}
	return v
}

// sum returns a checksum of the host part of the tree (sys, proc, etc and the NIC model): every
// path, mode, symlink target and content, and with times also every modification time.
func (tr *tree) sum(t *testing.T, times bool) string {
	t.Helper()
	h := sha256.New()
	for _, top := range []string{"sys", "proc", "etc", "fake/nic.json"} {
		err := filepath.WalkDir(tr.path(top), func(p string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) && p == tr.path(top) {
				return nil
			}
			if err != nil {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(tr.root, p)
			fmt.Fprintf(h, "%s %v", rel, info.Mode())
			if times && d.Type()&fs.ModeSymlink == 0 {
				fmt.Fprintf(h, " %d", info.ModTime().UnixNano())
			}
			switch {
			case d.Type()&fs.ModeSymlink != 0:
				target, err := os.Readlink(p)
				if err != nil {
					return err
				}
				fmt.Fprintf(h, " -> %s", target)
			case d.Type().IsRegular():
				b, err := os.ReadFile(p)
				if err != nil {
					return err
				}
				h.Write(b)
			}
			h.Write([]byte{0})
			return nil
		})
		if err != nil {
			t.Fatalf("checksum the tree: %v", err)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
