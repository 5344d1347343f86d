package runtime_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	"github.com/percore/percore/ring"
	percore "github.com/percore/percore/runtime"
	"golang.org/x/sys/unix"
)

// The io_uring driver's direct descriptors (UringDirectDescriptors,
// uring_fixed.go): connections of the loop's own plain listeners live in
// the ring's fixed file table, never in the process's descriptor table
// unless something asks for a descriptor; the table is never let run
// full by an accept; a descriptor is made once where one is needed.

// needDirect skips the test where the kernel lacks direct descriptors
// and returns the features to run with.
func needDirect(t *testing.T) *percore.UringFeatures {
	t.Helper()
	pctest.NeedURing(t)
	s, err := ring.Probe()
	if err != nil {
		t.Skipf("io_uring probe: %v", err)
	}
	if !s.HasFeature(ring.DirectDescriptors) || !s.HasFeature(ring.FixedFdInstall) {
		t.Skipf("the kernel lacks direct descriptors: %v; %v",
			s.FeatureError(ring.DirectDescriptors), s.FeatureError(ring.FixedFdInstall))
	}
	f := percore.DefaultUringFeatures | percore.UringDirectDescriptors
	return &f
}

// openFds counts the process's open descriptors.
func openFds(t *testing.T) int {
	t.Helper()
	names, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(names)
}

// slotEcho echoes, and answers "?" with what the connection lives on,
// and "fd" with the same after asking for its descriptor and addresses.
type slotEcho struct{}

func (slotEcho) OnData(c *percore.Conn, data []byte) {
	switch string(data) {
	case "?":
		c.Write(fmt.Appendf(nil, "slot=%v fd=%v.", percore.OnSlot(c), percore.HasDescriptor(c)))
	case "fd":
		fd := c.Fd()
		again := c.Fd()
		ra := c.RemoteAddr()
		c.Write(fmt.Appendf(nil, "slot=%v fd=%v same=%v remote=%v.", percore.OnSlot(c), fd >= 0, fd == again, ra != nil))
	default:
		c.Write(data)
	}
}

// ask sends q and reads the answer, up to its final '.'.
func ask(t *testing.T, c net.Conn, q string) string {
	t.Helper()
	if _, err := c.Write([]byte(q)); err != nil {
		t.Fatal(err)
	}
	var b []byte
	one := make([]byte, 1)
	for len(b) == 0 || b[len(b)-1] != '.' {
		if _, err := c.Read(one); err != nil {
			t.Fatalf("answer to %q after %q: %v", q, b, err)
		}
		b = append(b, one[0])
	}
	return string(b)
}

// Connections of a loop's own listener live on slots: the server side of
// fifty connections adds no descriptor to the process (the client's fifty
// are the only new ones), each echoes, and Conn.Fd makes one descriptor
// the first time, the same on the second call, kept until the close.
func TestDirectDescriptorsServeOnSlots(t *testing.T) {
	f := needDirect(t)
	rt := start(t, percore.Config{Backend: percore.IOURing, UringFeatures: f}, slotEcho{})
	if got := rt.Report().UringFeatures; got&percore.UringDirectDescriptors == 0 {
		t.Fatalf("the report says %v: no direct descriptors", got)
	}
	first := dial(t, rt)
	if got := ask(t, first, "?"); got != "slot=true fd=false." {
		t.Fatalf("a connection lives on %q, want a slot without a descriptor", got)
	}
	before := openFds(t)
	const n = 50
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = dial(t, rt)
		p := []byte(fmt.Sprintf("hello %02d", i))
		if got, err := roundTrip(conns[i], p); err != nil || !bytes.Equal(got, p) {
			t.Fatalf("echo %d: %q, %v", i, got, err)
		}
	}
	if grown := openFds(t) - before; grown != n {
		t.Fatalf("%d connections grew the process's descriptors by %d, want %d (the client's)", n, grown, n)
	}
	if got := ask(t, conns[0], "fd"); got != "slot=true fd=true same=true remote=true." {
		t.Fatalf("after Conn.Fd: %q", got)
	}
	if grown := openFds(t) - before; grown != n+1 {
		t.Fatalf("Conn.Fd grew the descriptors by %d, want one", grown-n)
	}
	p := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // past one send
	if got, err := roundTrip(conns[0], p); err != nil || !bytes.Equal(got, p) {
		t.Fatalf("a 1 MiB echo after Conn.Fd: %d bytes, %v", len(got), err)
	}
	for _, c := range conns {
		c.Close()
	}
	pctest.WaitFor(t, "the closes", func() bool { return rt.Stats().Closes == n })
	if grown := openFds(t) - before; grown != 0 {
		t.Fatalf("after the closes %d descriptors more than before", grown)
	}
}

// A table of 8 with a backlog of 16: the loop accepts one at a time into
// the table (its margin, the backlog, is larger than the table), so no
// accept finds it full; the connections past the eighth wait in the
// backlog, and each close lets one more in. Every dialled connection is
// served or still waiting, none lost: all 24 are echoed in the end.
func TestDirectDescriptorsTableLimit(t *testing.T) {
	f := needDirect(t)
	const slots, backlog, total = 8, 16, 24
	cfg := percore.FixedTable(percore.Config{Backend: percore.IOURing, UringFeatures: f, Backlog: backlog}, slots, -2)
	rt := start(t, cfg, slotEcho{})
	conns := make([]net.Conn, total)
	for i := range conns {
		conns[i] = dial(t, rt) // the kernel completes the handshake: the backlog holds 17
	}
	// Write one byte on each: the first eight are echoed; the others
	// wait in the backlog, their byte in the socket.
	for i, c := range conns {
		if _, err := c.Write([]byte{byte('a' + i)}); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	b := make([]byte, 1)
	for i := range slots {
		if _, err := io.ReadFull(conns[i], b); err != nil || b[0] != byte('a'+i) {
			t.Fatalf("connection %d: %q, %v", i, b, err)
		}
	}
	if s := rt.Stats(); s.Accepts != slots || s.AcceptErrors != 0 {
		t.Fatalf("with the table full: %d accepts, %d accept errors; want %d and 0", s.Accepts, s.AcceptErrors, slots)
	}
	// Each close frees a slot, and a waiting connection gets it, in the
	// order they queued.
	for i := slots; i < total; i++ {
		conns[i-slots].Close()
		if _, err := io.ReadFull(conns[i], b); err != nil || b[0] != byte('a'+i) {
			t.Fatalf("connection %d after a close: %q, %v", i, b, err)
		}
	}
	if s := rt.Stats(); s.Accepts != total || s.AcceptErrors != 0 {
		t.Fatalf("%d accepts, %d accept errors; want %d and 0", s.Accepts, s.AcceptErrors, total)
	}
}

// With a table large enough for a multishot accept (64 slots, a backlog
// of 8: a margin of 9), the accept is multishot until fewer slots are
// free than the margin, then single: 64 connections fill the table
// exactly, the rest wait, and nothing is lost.
func TestDirectDescriptorsMultishotThenSingle(t *testing.T) {
	f := needDirect(t)
	const slots, backlog = 64, 8
	cfg := percore.FixedTable(percore.Config{Backend: percore.IOURing, UringFeatures: f, Backlog: backlog}, slots, -2)
	rt := start(t, cfg, slotEcho{})
	var conns []net.Conn
	for len(conns) < slots {
		// In waves the backlog holds, each echoed before the next.
		wave := conns[len(conns):]
		for range min(backlog, slots-len(conns)) {
			wave = append(wave, dial(t, rt))
		}
		for i, c := range wave {
			p := []byte(fmt.Sprintf("wave %02d.%d", len(conns), i))
			if got, err := roundTrip(c, p); err != nil || !bytes.Equal(got, p) {
				t.Fatalf("echo: %q, %v", got, err)
			}
		}
		conns = append(conns, wave...)
	}
	extra := []net.Conn{dial(t, rt), dial(t, rt)}
	for _, c := range extra {
		if _, err := c.Write([]byte("w")); err != nil {
			t.Fatal(err)
		}
	}
	// A round trip on a served connection: the loop ran past the new
	// ones' arrival, and took none (the table is full).
	if got, err := roundTrip(conns[0], []byte("ping")); err != nil || string(got) != "ping" {
		t.Fatalf("ping: %q, %v", got, err)
	}
	if s := rt.Stats(); s.Accepts != slots || s.AcceptErrors != 0 {
		t.Fatalf("%d accepts, %d accept errors; want %d and 0", s.Accepts, s.AcceptErrors, slots)
	}
	conns[1].Close()
	conns[2].Close()
	b := make([]byte, 1)
	for i, c := range extra {
		if _, err := io.ReadFull(c, b); err != nil || b[0] != 'w' {
			t.Fatalf("waiting connection %d after the closes: %q, %v", i, b, err)
		}
	}
}

// With no margin (a test's setting: the multishot accept is never
// cancelled), a burst finds the table full: the kernel loses the
// connection it accepted (-ENFILE). That is counted in AcceptErrors and
// logged once, the accept waits for a close, and the connections that
// wait in the backlog are served after it.
func TestDirectDescriptorsTableFullCounted(t *testing.T) {
	f := needDirect(t)
	const slots = 4
	log, records := pctest.LogInbox()
	cfg := percore.FixedTable(percore.Config{Backend: percore.IOURing, UringFeatures: f, Backlog: 16, Logger: log}, slots, -1)
	rt := start(t, cfg, slotEcho{})
	var conns []net.Conn
	for i := range slots {
		c := dial(t, rt)
		p := []byte{byte('a' + i)}
		if got, err := roundTrip(c, p); err != nil || !bytes.Equal(got, p) {
			t.Fatalf("echo %d: %q, %v", i, got, err)
		}
		conns = append(conns, c)
	}
	// The fifth finds the table full and is lost; its multishot ended.
	lost := dial(t, rt)
	pctest.WaitFor(t, "the accept error", func() bool { return rt.Stats().AcceptErrors == 1 })
	if _, err := io.ReadAll(lost); err != nil && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("the lost connection: %v", err)
	}
	waiting := dial(t, rt)
	if _, err := waiting.Write([]byte("w")); err != nil {
		t.Fatal(err)
	}
	conns[0].Close()
	b := make([]byte, 1)
	if _, err := io.ReadFull(waiting, b); err != nil || b[0] != 'w' {
		t.Fatalf("the waiting connection after a close: %q, %v", b, err)
	}
	warned := 0
	for _, r := range records.Drain() {
		if strings.Contains(r.Message, "table full") {
			warned++
		}
	}
	if warned != 1 {
		t.Fatalf("the full table was logged %d times, want once", warned)
	}
	if s := rt.Stats(); s.AcceptErrors != 1 {
		t.Fatalf("%d accept errors, want 1", s.AcceptErrors)
	}
}

// fileServer answers any request with the file's bytes (SendFile), then
// what the connection lives on.
type fileServer struct{ path string }

func (h fileServer) OnData(c *percore.Conn, _ []byte) {
	st, err := os.Stat(h.path)
	if err != nil {
		c.Write([]byte("stat: " + err.Error() + "."))
		return
	}
	c.Loop().OpenFile(h.path, os.O_RDONLY, 0, func(f *percore.File, err error) {
		if err != nil {
			c.Write([]byte("open: " + err.Error() + "."))
			return
		}
		if err := c.SendFile(f, 0, st.Size(), func(_ int64, err error) {
			c.Write(fmt.Appendf(nil, "|slot=%v fd=%v err=%v.", percore.OnSlot(c), percore.HasDescriptor(c), err))
			f.Close(nil)
		}); err != nil {
			c.Write([]byte("sendfile: " + err.Error() + "."))
		}
	})
}

// SendFile on a connection that lives on a slot: splice needs a
// descriptor, made for it once; the file arrives whole.
func TestDirectDescriptorsSendFile(t *testing.T) {
	f := needDirect(t)
	path := filepath.Join(t.TempDir(), "payload")
	want := bytes.Repeat([]byte("direct descriptors "), 20000)
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	rt := start(t, percore.Config{Backend: percore.IOURing, UringFeatures: f}, fileServer{path})
	for range 2 {
		c := dial(t, rt)
		if _, err := c.Write([]byte("get")); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(want))
		if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("the file: %v (equal %v)", err, bytes.Equal(got, want))
		}
		if tail := ask(t, c, ""); tail != "|slot=true fd=true err=<nil>." {
			t.Fatalf("after the file: %q", tail)
		}
	}
}

// A shared listener (a Unix socket every loop accepts from) spreads its
// connections over the loops as descriptors, with direct descriptors on:
// its connections never live on a slot, so no slot crosses loops, and
// each is served by whichever loop it went to.
func TestDirectDescriptorsSharedListenerSpreads(t *testing.T) {
	f := needDirect(t)
	cores := pctest.LoopCores(t, 2)
	sock := filepath.Join(t.TempDir(), "s")
	rt := start(t, percore.Config{Backend: percore.IOURing, UringFeatures: f, Cores: cores,
		Listen: []string{"unix://" + sock, "tcp://127.0.0.1:0"}}, slotEcho{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("unix", sock)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write([]byte("?")); err != nil {
				errs <- err
				return
			}
			got := make([]byte, len("slot=false fd=true."))
			if _, err := io.ReadFull(c, got); err != nil || string(got) != "slot=false fd=true." {
				errs <- fmt.Errorf("unix connection %d: %q, %v", i, got, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s := rt.Stats(); s.HandedOver == 0 {
		t.Errorf("no connection went to the other loop (HandedOver 0)")
	}
	// The TCP listener of each loop is its own: on slots.
	tc := pctest.Dial(t, rt.Listeners()[1].Addr.String())
	if got := ask(t, tc, "?"); got != "slot=true fd=false." {
		t.Fatalf("a TCP connection: %q", got)
	}
}

// The restart hand-over with direct descriptors in both processes: the
// old one's TCP connections live on slots, and each gets a descriptor
// made for its SCM_RIGHTS duplicate; the new one adopts descriptors (and
// its inherited listeners are shared, so they stay descriptors). Every
// client, TCP and Unix, is answered by the new process, nobody sees a
// close, and the old process leaves no descriptor behind.
func TestDirectDescriptorsHandover(t *testing.T) {
	needDirect(t)
	t.Setenv(pctest.UringFeaturesEnv, "registered_ring,direct_descriptors")
	p := newHoPair(t, percore.IOURing, nil)
	if got := p.old.Report().UringFeatures; got&percore.UringDirectDescriptors == 0 {
		t.Fatalf("the old process uses %v", got)
	}
	const n = 20
	clients := make([]*hoClient, n)
	for i := range clients {
		clients[i] = p.dial(t, i, "d")
	}
	if err := pctest.Recv(t, p.handOver(t, 20*time.Second), "the hand-over"); err != nil {
		t.Fatal(err)
	}
	for _, cl := range clients {
		if got, err := cl.ask("after"); err != nil || got != "B "+cl.id+" after" {
			t.Fatalf("%s after the hand-over: %q, %v", cl.id, got, err)
		}
	}
	if st, nst := p.old.Stats(), p.next.Stats(); st.HandedOff != n || st.HandoffFailed != 0 || nst.Adopted != n {
		t.Fatalf("handed %d (failed %d), adopted %d; want %d, 0, %d", st.HandedOff, st.HandoffFailed, nst.Adopted, n, n)
	}
}

// A table the kernel refuses (larger than RLIMIT_NOFILE) leaves the loop
// on descriptors: logged once, the feature off in the report, and the
// connections served as before.
func TestDirectDescriptorsRefused(t *testing.T) {
	f := needDirect(t)
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	log, records := pctest.LogInbox()
	cfg := percore.FixedTable(percore.Config{Backend: percore.IOURing, UringFeatures: f, Logger: log}, int(lim.Cur)+1000, -2)
	rt := start(t, cfg, slotEcho{})
	if got := rt.Report().UringFeatures; got&percore.UringDirectDescriptors != 0 || got&percore.UringRegisteredRing == 0 {
		t.Fatalf("the report says %v: want the registered ring without direct descriptors", got)
	}
	c := dial(t, rt)
	if got := ask(t, c, "?"); got != "slot=false fd=true." {
		t.Fatalf("a connection lives on %q, want a descriptor", got)
	}
	refused := 0
	for _, r := range records.Drain() {
		if strings.Contains(r.Message, "direct descriptors refused") {
			refused++
		}
	}
	if refused != 1 {
		t.Fatalf("the refusal was logged %d times, want once", refused)
	}
}

// Two listeners of the loop accept into one table of 2: the accepts
// armed on both count against the free slots, so that none is armed
// without a slot for it. Two connections on the first fill the table;
// one on the second then waits in its backlog (no accept error, nothing
// lost) and is served once a slot is closed, and so is a third on the
// first after another close.
func TestDirectDescriptorsTwoListenersShareTheTable(t *testing.T) {
	f := needDirect(t)
	cfg := percore.FixedTable(percore.Config{Backend: percore.IOURing, UringFeatures: f,
		Addr: "127.0.0.1:0", Listen: []string{"127.0.0.1:0"}}, 2, -2)
	rt := start(t, cfg, slotEcho{})
	lns := rt.Listeners()
	if len(lns) != 2 {
		t.Fatalf("%d listeners, want 2", len(lns))
	}
	on := func(i int, b byte) net.Conn {
		c := pctest.Dial(t, lns[i].Addr.String())
		if _, err := c.Write([]byte{b}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	echoed := func(c net.Conn, want byte) {
		t.Helper()
		b := make([]byte, 1)
		if _, err := io.ReadFull(c, b); err != nil || b[0] != want {
			t.Fatalf("echo of %q: %q, %v (stats %+v)", want, b, err, rt.Stats())
		}
	}
	a0, a1 := on(0, 'a'), on(0, 'b')
	echoed(a0, 'a')
	echoed(a1, 'b')
	b0 := on(1, 'c') // waits: the table is full
	a2 := on(0, 'd')
	if s := rt.Stats(); s.Accepts != 2 || s.AcceptErrors != 0 {
		t.Fatalf("with the table full: %d accepts, %d accept errors; want 2 and 0", s.Accepts, s.AcceptErrors)
	}
	a0.Close()
	a1.Close()
	echoed(b0, 'c')
	echoed(a2, 'd')
	if s := rt.Stats(); s.Accepts != 4 || s.AcceptErrors != 0 {
		t.Fatalf("%d accepts, %d accept errors; want 4 and 0", s.Accepts, s.AcceptErrors)
	}
}
