package runtime_test

import (
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"golang.org/x/sys/unix"
)

// The faults of a hand-over, played by a proxy between the two runtimes'
// channel ends: it passes each message on (descriptors and all) and the
// acknowledgement back, and a test's hook may first act on the
// connections a message carries, pass on only some of its descriptors
// (the new process out of them), or cut the channel (a process dying).

// proxyAction is what the proxy does with message i.
type proxyAction struct {
	forward int  // descriptors passed on: -1 all
	cut     bool // close both sides instead: the peer process died
}

// useProxy puts a proxy between p's channel ends, with hook deciding for
// each message from the names (states) of its connections.
func (p *hoPair) useProxy(t *testing.T, hook func(i int, ids []string) proxyAction) {
	t.Helper()
	oldEnd, pa, err := percore.HandoverSockets()
	if err != nil {
		t.Fatal(err)
	}
	pb, nextEnd, err := percore.HandoverSockets()
	if err != nil {
		t.Fatal(err)
	}
	p.oldEnd.Close()
	p.nextEnd.Close()
	p.oldEnd, p.nextEnd = oldEnd, nextEnd
	t.Cleanup(func() { oldEnd.Close(); nextEnd.Close() })
	a, b := unixPacket(t, pa), unixPacket(t, pb)
	done := make(chan struct{})
	t.Cleanup(func() { a.Close(); b.Close(); <-done })
	go func() {
		defer close(done)
		defer a.Close()
		defer b.Close()
		buf, oob, ack := make([]byte, 1<<17), make([]byte, unix.CmsgSpace(256*4)), make([]byte, 16)
		for i := 0; ; i++ {
			n, oobn, _, _, err := a.ReadMsgUnix(buf, oob)
			if err != nil || n == 0 {
				return
			}
			fds := rights(t, oob[:oobn])
			states, err := percore.HandoffStates(buf[:n])
			if err != nil {
				t.Errorf("proxy: %v", err)
			}
			ids := make([]string, len(states))
			for k, s := range states {
				ids[k], _, _ = strings.Cut(s, "|")
			}
			p.mu.Lock()
			act := hook(i, ids)
			p.mu.Unlock()
			if act.forward < 0 || act.forward > len(fds) {
				act.forward = len(fds)
			}
			closeAll := func() {
				for _, fd := range fds {
					unix.Close(fd)
				}
			}
			if act.cut {
				closeAll()
				return
			}
			_, _, err = b.WriteMsgUnix(buf[:n], unix.UnixRights(fds[:act.forward]...), nil)
			closeAll()
			if err != nil {
				return
			}
			m, err := b.Read(ack)
			if err != nil {
				return
			}
			if _, err := a.Write(ack[:m]); err != nil {
				return
			}
		}
	}()
}

func unixPacket(t *testing.T, f *os.File) *net.UnixConn {
	t.Helper()
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	return c.(*net.UnixConn)
}

func rights(t *testing.T, oob []byte) []int {
	if len(oob) == 0 {
		return nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		t.Errorf("proxy: %v", err)
		return nil
	}
	var fds []int
	for i := range msgs {
		f, err := unix.ParseUnixRights(&msgs[i])
		if err == nil {
			fds = append(fds, f...)
		}
	}
	return fds
}

// expectMoved checks that exactly the clients in moved answer from the new
// process, and every other one gets the old process's goodbye and its
// close: no connection is lost without the protocol's close.
func expectMoved(t *testing.T, clients []*hoClient, moved map[string]bool) {
	t.Helper()
	for _, cl := range clients {
		if moved[cl.id] {
			if got, err := cl.ask("x"); err != nil || got != "B "+cl.id+" x" {
				t.Fatalf("%s (handed over): %q, %v", cl.id, got, err)
			}
			continue
		}
		s, err := cl.r.ReadString('\n')
		if s != "bye A\n" || err != nil {
			t.Fatalf("%s (kept): %q, %v; want the old process's goodbye", cl.id, s, err)
		}
		if _, err := cl.r.ReadByte(); err == nil {
			t.Fatalf("%s: more after the goodbye", cl.id)
		}
	}
}

// The new process dies after taking the first message: the old one keeps
// the connections of the message it was sending and of those it had not
// sent, serves them and closes them the protocol's way, counted and
// logged; the first message's connections are the new process's.
func TestHandoverNewProcessDies(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		logger, logs := pctest.LogInbox()
		p := newHoPair(t, b, nil, logger)
		p.oldH.pad = 7000 // 9 connections a message
		var clients []*hoClient
		for i := range 40 {
			clients = append(clients, p.dial(t, i, "c"))
		}
		moved := map[string]bool{}
		p.useProxy(t, func(i int, ids []string) proxyAction {
			if i == 0 {
				for _, id := range ids {
					moved[id] = true
				}
				return proxyAction{forward: -1}
			}
			return proxyAction{cut: true}
		})
		if err := pctest.Recv(t, p.handOver(t, 20*time.Second), "the hand-over"); err != nil {
			t.Fatal(err)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		expectMoved(t, clients, moved)
		st := p.old.Stats()
		if int(st.HandedOff) != len(moved) || int(st.HandoffFailed) != 40-len(moved) || len(moved) == 0 {
			t.Fatalf("handed %d failed %d; want %d and %d", st.HandedOff, st.HandoffFailed, len(moved), 40-len(moved))
		}
		logged := false
		for _, r := range logs.Drain() {
			logged = logged || (r.Level == slog.LevelError && strings.Contains(r.Message, "hand-over to the new process stopped"))
		}
		if !logged {
			t.Fatal("the new process's death was not logged")
		}
	})
}

// The new process receives only some descriptors of a message (out of
// descriptors): it adopts those, and the old process keeps the rest and
// closes them the protocol's way, counted.
func TestHandoverPartialBatch(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		p := newHoPair(t, b, nil)
		p.oldH.pad = 7000
		var clients []*hoClient
		for i := range 30 {
			clients = append(clients, p.dial(t, i, "c"))
		}
		moved := map[string]bool{}
		kept := 0
		p.useProxy(t, func(i int, ids []string) proxyAction {
			k := len(ids)
			if kept == 0 && k >= 2 {
				k /= 2 // the first message of several: half of it
			}
			for _, id := range ids[:k] {
				moved[id] = true
			}
			kept += len(ids) - k
			return proxyAction{forward: k}
		})
		if err := pctest.Recv(t, p.handOver(t, 20*time.Second), "the hand-over"); err != nil {
			t.Fatal(err)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		expectMoved(t, clients, moved)
		if st := p.old.Stats(); int(st.HandoffFailed) != kept || kept == 0 || int(st.HandedOff) != 30-kept {
			t.Fatalf("handed %d failed %d; want %d and %d", st.HandedOff, st.HandoffFailed, 30-kept, kept)
		}
	})
}

// Peers that close while their connection is between the processes: the
// new process adopts them, reads the end of their stream and closes them,
// counted; nothing stays open.
func TestHandoverPeerClosedInFlight(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		p := newHoPair(t, b, nil)
		byID := map[string]*hoClient{}
		var clients []*hoClient
		for i := range 20 {
			cl := p.dial(t, i, "c")
			clients = append(clients, cl)
			byID[cl.id] = cl
		}
		gone := map[string]bool{}
		p.useProxy(t, func(i int, ids []string) proxyAction {
			for k, id := range ids {
				if k%2 == 0 {
					byID[id].c.Close()
					gone[id] = true
				}
			}
			return proxyAction{forward: -1}
		})
		if err := pctest.Recv(t, p.handOver(t, 20*time.Second), "the hand-over"); err != nil {
			t.Fatal(err)
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		pctest.WaitFor(t, "the closed peers' connections to close", func() bool {
			return int(p.next.Stats().Closes) == len(gone)
		})
		for _, cl := range clients {
			if gone[cl.id] {
				continue
			}
			if got, err := cl.ask("x"); err != nil || got != "B "+cl.id+" x" {
				t.Fatalf("%s: %q, %v", cl.id, got, err)
			}
		}
		nst := p.next.Stats()
		if nst.Adopted != 20 || int(nst.Open) != 20-len(gone) || int(p.nextH.closes.Load()) != len(gone) || len(gone) == 0 {
			t.Fatalf("new: adopted %d open %d closed %d; want 20, %d, %d", nst.Adopted, nst.Open, p.nextH.closes.Load(), 20-len(gone), len(gone))
		}
	})
}

// The old process dies (the channel is cut) after the first message: the
// new process serves what arrived and ends its side cleanly.
func TestHandoverOldProcessDies(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		p := newHoPair(t, b, nil)
		p.oldH.pad = 7000
		var clients []*hoClient
		for i := range 20 {
			clients = append(clients, p.dial(t, i, "c"))
		}
		moved := map[string]bool{}
		p.useProxy(t, func(i int, ids []string) proxyAction {
			if i > 0 {
				return proxyAction{cut: true}
			}
			for _, id := range ids {
				moved[id] = true
			}
			return proxyAction{forward: -1}
		})
		done := p.handOver(t, 20*time.Second)
		var got map[string]bool
		pctest.WaitFor(t, "the first message adopted", func() bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			got = maps.Clone(moved)
			return int(p.next.Stats().Adopted) == len(moved) && len(moved) > 0
		})
		for _, cl := range clients {
			if got[cl.id] {
				if got, err := cl.ask("y"); err != nil || got != "B "+cl.id+" y" {
					t.Fatalf("%s: %q, %v", cl.id, got, err)
				}
			}
		}
		if err := pctest.Recv(t, done, "the hand-over"); err != nil {
			t.Fatal(err)
		}
	})
}

// Malformed messages (seeded random bytes, a count of records that does
// not match the descriptors, too many records) are refused with an
// acknowledgement of none, their descriptors closed; a good one after
// them is adopted.
func TestAdoptMalformed(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		h := &hoHandler{name: "B"}
		rt := start(t, percore.Config{Backend: b}, h)
		old, next, err := percore.HandoverSockets()
		if err != nil {
			t.Fatal(err)
		}
		defer old.Close()
		if err := rt.Adopt(next); err != nil {
			t.Fatal(err)
		}
		next.Close()
		if err := rt.Adopt(old); err == nil {
			t.Fatal("a second Adopt succeeded")
		}
		ch := unixPacket(t, old)
		defer ch.Close()
		_ = ch.SetDeadline(time.Now().Add(10 * time.Second))
		socket := func() int {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Close(fds[1]) })
			return fds[0]
		}
		send := func(msg []byte, fds ...int) uint32 {
			t.Helper()
			var oob []byte
			if len(fds) > 0 {
				oob = unix.UnixRights(fds...)
			}
			if _, _, err := ch.WriteMsgUnix(msg, oob, nil); err != nil {
				t.Fatal(err)
			}
			for _, fd := range fds {
				unix.Close(fd)
			}
			ack := make([]byte, 8)
			if n, err := ch.Read(ack); err != nil || n != 8 {
				t.Fatalf("ack: %d, %v", n, err)
			}
			return uint32(ack[4]) | uint32(ack[5])<<8
		}
		rng := rand.New(rand.NewPCG(30, 1))
		for i := range 40 {
			msg := make([]byte, 1+rng.IntN(200))
			for k := range msg {
				msg[k] = byte(rng.Uint32())
			}
			if i%2 == 0 {
				copy(msg, "PCH1") // a header, then garbage
			}
			if taken := send(msg, socket()); taken != 0 {
				t.Fatalf("random message %d: %d taken", i, taken)
			}
		}
		if taken := send(percore.EncodeHandoff(1, "x", "a", "b"), socket(), socket(), socket()); taken != 0 {
			t.Fatalf("3 descriptors for 2 records: %d taken", taken)
		}
		if taken := send(percore.EncodeHandoff(2, "x", strings.Split(strings.Repeat("s,", 201), ",")...)); taken != 0 {
			t.Fatalf("202 records: %d taken", taken)
		}
		fd := socket()
		if taken := send(percore.EncodeHandoff(3, "x", "good"), fd); taken != 1 {
			t.Fatalf("a good message: %d taken", taken)
		}
		pctest.WaitFor(t, "the good connection adopted", func() bool { return h.adopted.Load() == 1 && rt.Stats().Adopted == 1 })
		if _, ok := h.states.Load("good"); !ok || rt.Stats().Adopted != 1 {
			t.Fatalf("adopted %d, state %v", rt.Stats().Adopted, ok)
		}
	})
}

// A channel that is not a SOCK_SEQPACKET socket is refused with a clear
// error, by both sides.
func TestHandoverBadChannel(t *testing.T) {
	rt := start(t, percore.Config{}, &hoHandler{name: "A"})
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if err := rt.Adopt(r); err == nil {
		t.Fatal("Adopt of a pipe succeeded")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := rt.HandOver(shutdownCtx(t, 5*time.Second), f); err == nil || !strings.Contains(err.Error(), "SOCK_SEQPACKET") {
		t.Fatalf("HandOver on a TCP listener: %v", err)
	}
	if err := rt.Adopt(nil); err == nil {
		t.Fatal("Adopt(nil) succeeded")
	}
}

// A state over MaxHandoverState is not sent: the connection closes the
// protocol's way.
func TestHandoverStateTooLarge(t *testing.T) {
	p := newHoPair(t, percore.Epoll, nil)
	p.oldH.pad = percore.MaxHandoverState
	cl := p.dial(t, 0, "c")
	if err := pctest.Recv(t, p.handOver(t, 20*time.Second), "the hand-over"); err != nil {
		t.Fatal(err)
	}
	expectMoved(t, []*hoClient{cl}, nil)
	if st := p.old.Stats(); st.HandoffDeclined != 1 || st.HandedOff != 0 {
		t.Fatalf("declined %d handed %d", st.HandoffDeclined, st.HandedOff)
	}
}
