package listener

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"slices"
	"syscall"
	"testing"

	"github.com/percore/percore/internal/leakcheck"
	"golang.org/x/sys/unix"
)

func TestGroupSpreadsConnections(t *testing.T) {
	const (
		clients = 64
		rounds  = 5 // the kernel hashes each connection; all on one socket is unlikely but possible
	)
	ls := mustGroup(t, "tcp", "127.0.0.1:0", []int{0, 1, 2, 3}, Config{})
	port := ls[0].Addr().(*net.TCPAddr).Port
	if port == 0 {
		t.Fatal("group bound port 0")
	}
	for i, l := range ls {
		if got := l.Addr().(*net.TCPAddr).Port; got != port {
			t.Fatalf("listener %d bound port %d, listener 0 port %d", i, got, port)
		}
	}
	for round := 1; round <= rounds; round++ {
		var conns []net.Conn
		want := make(map[int]bool)
		for range clients {
			c := dial(t, "tcp", ls[0].Addr().String())
			conns = append(conns, c)
			want[c.LocalAddr().(*net.TCPAddr).Port] = true
		}
		peers := acceptAll(t, fds(ls), clients)
		extra := pending(t, fds(ls))
		for _, c := range conns {
			c.Close()
		}
		if extra {
			t.Fatal("a listener still has a pending connection after every client was accepted")
		}
		seen := make(map[int]int)
		used := 0
		for _, ps := range peers {
			if len(ps) > 0 {
				used++
			}
			for _, p := range ps {
				seen[p]++
			}
		}
		for p := range want {
			if seen[p] != 1 {
				t.Errorf("client port %d accepted %d times, want once", p, seen[p])
			}
		}
		if len(seen) != len(want) {
			t.Errorf("accepted %d distinct peers, dialled %d", len(seen), len(want))
		}
		if t.Failed() {
			return
		}
		if used >= 2 {
			split := make([]int, len(peers))
			for i, ps := range peers {
				split[i] = len(ps)
			}
			t.Logf("round %d: connections per listener %v", round, split)
			return
		}
		t.Logf("round %d: all %d connections went to one listener; retrying", round, clients)
	}
	t.Fatalf("in %d rounds of %d connections only one listener of %d ever accepted", rounds, clients, len(ls))
}

func TestGroupUDPBindsOnePort(t *testing.T) {
	const datagrams = 32
	ls := mustGroup(t, "udp", "127.0.0.1:0", []int{0, 1, 2}, Config{})
	addr := ls[0].Addr().(*net.UDPAddr)
	if addr.Port == 0 {
		t.Fatal("group bound port 0")
	}
	for i, l := range ls {
		if got := l.Addr().(*net.UDPAddr); got.Port != addr.Port || !got.IP.Equal(addr.IP) {
			t.Fatalf("listener %d bound %v, listener 0 %v", i, got, addr)
		}
	}
	// Each datagram comes from its own socket (its own source port), so the
	// group's hash has something to spread; each carries its index.
	for i := range datagrams {
		c, err := net.DialUDP("udp", nil, addr)
		if err != nil {
			t.Fatalf("dial udp %v: %v", addr, err)
		}
		var msg [4]byte
		binary.BigEndian.PutUint32(msg[:], uint32(i))
		_, err = c.Write(msg[:])
		c.Close()
		if err != nil {
			t.Fatalf("send datagram %d: %v", i, err)
		}
	}
	got := make(map[uint32]int)
	buf := make([]byte, 64)
	drain(t, fds(ls), datagrams, func(_, fd int) (bool, error) {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return false, nil
		case err != nil:
			return false, err
		case n != 4:
			return false, errors.New("datagram of unexpected length")
		}
		got[binary.BigEndian.Uint32(buf)]++
		return true, nil
	})
	for i := range uint32(datagrams) {
		if got[i] != 1 {
			t.Errorf("datagram %d received %d times, want once", i, got[i])
		}
	}
}

func TestReusePortConflict(t *testing.T) {
	heldTCP, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer heldTCP.Close()
	heldUDP, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer heldUDP.Close()
	tcpAddr, udpAddr := heldTCP.Addr().String(), heldUDP.LocalAddr().String()

	tests := []struct {
		name    string
		network string
		addr    string
		open    func() error
	}{
		{"tcp listen", "tcp", tcpAddr, func() error { _, err := Listen("tcp", tcpAddr, Config{}); return err }},
		{"tcp group", "tcp", tcpAddr, func() error { _, err := Group("tcp", tcpAddr, []int{0, 1}, Config{}); return err }},
		{"udp listen", "udp", udpAddr, func() error { _, err := ListenPacket("udp", udpAddr, Config{}); return err }},
		{"udp group", "udp", udpAddr, func() error { _, err := Group("udp", udpAddr, []int{0, 1}, Config{}); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.open()
			if !errors.Is(err, syscall.EADDRINUSE) {
				t.Fatalf("bind over a socket without SO_REUSEPORT: %v, want EADDRINUSE", err)
			}
			var oe *net.OpError
			var se *os.SyscallError
			if !errors.As(err, &oe) || oe.Op != "listen" || oe.Net != tt.network || !errors.As(err, &se) || se.Syscall != "bind" {
				t.Errorf("error %#v is not a *net.OpError{Op: listen} wrapping a bind *os.SyscallError", err)
			}
			if want := "listen " + tt.network + " " + tt.addr + ": bind: address already in use"; err.Error() != want {
				t.Errorf("error text %q, want %q", err, want)
			}
		})
	}
}

func TestGroupClosesOnFailure(t *testing.T) {
	// Leave room for a few sockets under RLIMIT_NOFILE so that the group
	// fails part-way with EMFILE after opening some.
	before := leakcheck.OpenFDs()
	maxFD := 0
	for fd := range before {
		maxFD = max(maxFD, fd)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	limit := uint64(maxFD) + 1 + 2
	free := int(limit) - len(before)
	if limit > old.Cur {
		t.Skipf("RLIMIT_NOFILE %d leaves no room to test", old.Cur)
	}
	tight := syscall.Rlimit{Cur: limit, Max: old.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &tight); err != nil {
		t.Skipf("cannot lower RLIMIT_NOFILE: %v", err)
	}
	ls, err := Group("tcp", "127.0.0.1:0", make([]int, free+3), Config{Backlog: 16})
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatalf("restore RLIMIT_NOFILE: %v", err)
	}
	if err == nil {
		closeAll(ls)
		t.Fatalf("Group of %d with room for %d descriptors succeeded", free+3, free)
	}
	if !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("Group error %v, want EMFILE", err)
	}
	after := leakcheck.OpenFDs()
	for fd, target := range after {
		if before[fd] != target {
			t.Errorf("descriptor %d -> %s is open after the failed Group", fd, target)
		}
	}
}

func TestGroupRejects(t *testing.T) {
	tests := []struct {
		name    string
		network string
		cpus    []int
		want    error // nil: any error
	}{
		{"unix", "unix", []int{0}, errors.ErrUnsupported},
		{"no cpus", "tcp", nil, nil},
		{"unknown network", "sctp", []int{0}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ls, err := Group(tt.network, "127.0.0.1:0", tt.cpus, Config{})
			if err == nil {
				closeAll(ls)
				t.Fatalf("Group(%q, %v) succeeded", tt.network, tt.cpus)
			}
			var oe *net.OpError
			if !errors.As(err, &oe) || oe.Op != "listen" {
				t.Errorf("error %#v is not a *net.OpError{Op: listen}", err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("error %v does not wrap %v", err, tt.want)
			}
		})
	}
}

func TestIncomingCPU(t *testing.T) {
	tests := []struct {
		name string
		open func(t *testing.T) []*Listener
		want []int
	}{
		{"tcp", func(t *testing.T) []*Listener {
			return []*Listener{mustListen(t, "tcp", "127.0.0.1:0", Config{IncomingCPU: true, CPU: 1})}
		}, []int{1}},
		{"udp", func(t *testing.T) []*Listener {
			return []*Listener{mustListenPacket(t, "udp", "127.0.0.1:0", Config{IncomingCPU: true, CPU: 0})}
		}, []int{0}},
		{"not set", func(t *testing.T) []*Listener {
			return []*Listener{mustListen(t, "tcp", "127.0.0.1:0", Config{CPU: 1})}
		}, []int{-1}},
		{"tcp group", func(t *testing.T) []*Listener {
			return mustGroup(t, "tcp", "127.0.0.1:0", []int{1, 0, 1}, Config{IncomingCPU: true, CPU: 7})
		}, []int{1, 0, 1}},
		{"udp group", func(t *testing.T) []*Listener {
			return mustGroup(t, "udp", "127.0.0.1:0", []int{0, 1}, Config{IncomingCPU: true})
		}, []int{0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []int
			for _, l := range tt.open(t) {
				cpu, err := l.IncomingCPU()
				if errors.Is(err, unix.ENOPROTOOPT) {
					t.Skipf("the kernel has no SO_INCOMING_CPU: %v", err)
				}
				if err != nil {
					t.Fatalf("IncomingCPU: %v", err)
				}
				if fd := l.Fd(); getInt(t, fd, unix.SOL_SOCKET, unix.SO_INCOMING_CPU) != cpu {
					t.Errorf("IncomingCPU() = %d disagrees with getsockopt", cpu)
				}
				got = append(got, cpu)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("SO_INCOMING_CPU read back %v, want %v", got, tt.want)
			}
		})
	}
}
