package runtime_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// The io_uring driver's zero-copy sends (UringZeroCopySend, uring_zc.go,
// docs/decisions/0068) against the kernel. The model test
// (model_uring_test.go) checks the buffer lifetime in every interleaving;
// these check what only the kernel shows: the bytes arrive whole and in
// order, a buffer is not reused while the kernel still holds its pages
// (a reader that lets the socket fill up), a Unix socket falls back to
// plain sends, and the loop ends only after every notification.

// zcConfig is an io_uring config with zero-copy sends from min bytes, or
// a skip where the kernel lacks them.
func zcConfig(t *testing.T, min int, also percore.UringFeatures) percore.Config {
	t.Helper()
	pctest.NeedURing(t)
	f := percore.DefaultUringFeatures | percore.UringZeroCopySend | also
	if kernelFeatures(t, percore.UringZeroCopySend) == 0 {
		t.Skip("the kernel lacks IORING_OP_SEND_ZC with usage reports (6.2+)")
	}
	return percore.Config{Backend: percore.IOURing, UringFeatures: &f, ZeroCopySendMin: min}
}

// stopAndCheckHeld stops rt and checks that no loop ended with a
// zero-copy send the kernel had not finished.
func stopAndCheckHeld(t *testing.T, rt *percore.Runtime) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := rt.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	for _, l := range rt.Loops() {
		if n, b := percore.ZeroCopyHeld(l); n != 0 || b != 0 {
			t.Errorf("loop ended with %d zero-copy sends unfinished, holding %d bytes", n, b)
		}
	}
}

// TestZeroCopySendEcho echoes payloads below and above the threshold on
// several connections at once, with each feature set zero-copy sends
// combine with: the bytes come back whole, the large ones went with zero
// copy, and on loopback every notification says the kernel copied.
func TestZeroCopySendEcho(t *testing.T) {
	for _, also := range []percore.UringFeatures{0, percore.UringSkipSends, percore.UringDirectDescriptors} {
		t.Run(also.String(), func(t *testing.T) {
			rt := start(t, zcConfig(t, 16<<10, also), echoHandler{})
			if rt.Report().UringFeatures&percore.UringZeroCopySend == 0 {
				t.Fatalf("the loop does not use zero-copy sends: %v", rt.Report().UringFeatures)
			}
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for id := range 4 {
				c := dial(t, rt)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i, size := range []int{1, 16 << 10, 64<<10 + 3, 100, 300 << 10, 1 << 20, 20 << 10} {
						p := make([]byte, size)
						for j := range p {
							p[j] = byte(j*7 + j/251 + i*3 + id*31)
						}
						got, err := roundTrip(c, p)
						if err == nil && !bytes.Equal(got, p) {
							err = io.ErrUnexpectedEOF
						}
						if err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("echo: %v", err)
			}
			// The notifications come once the receiver has the bytes:
			// all of them by now, or soon.
			pctest.WaitFor(t, "every zero-copy send's notification", func() bool {
				s := rt.Stats()
				return s.ZeroCopySends > 0 && s.ZeroCopyCopied == s.ZeroCopySends
			})
			if s := rt.Stats(); s.ZeroCopyFallbacks != 0 {
				t.Errorf("%d fallbacks on TCP", s.ZeroCopyFallbacks)
			}
			stopAndCheckHeld(t, rt)
		})
	}
}

// chunkWriter answers each byte it reads with a chunk of chunkSize bytes,
// numbered by the connection's chunks so far.
type chunkWriter struct{ n map[*percore.Conn]int }

const chunkSize = 64 << 10

func chunkByte(k, j int) byte { return byte(k*13 + j*7 + j/253) }

func (h *chunkWriter) OnData(c *percore.Conn, data []byte) {
	for range data {
		k := h.n[c]
		h.n[c] = k + 1
		room := c.Reserve(chunkSize)
		for j := range room {
			room[j] = chunkByte(k, j)
		}
		c.Commit(chunkSize)
	}
}

// TestZeroCopySendSlowReader has the server send chunk after chunk, each
// its own buffer, while the client reads nothing: once the client's
// receive window closes, each send completes with its pages still in the
// server socket's queue, and the queue lets its buffer go. A buffer given
// back to the pool then (and reused for the next chunk) before its
// notification would change bytes the kernel has yet to deliver: every
// chunk must arrive as written. The client asks for the next chunk once
// the last one's send completed (Stats.BytesOut), or after a second.
func TestZeroCopySendSlowReader(t *testing.T) {
	rt := start(t, zcConfig(t, 16<<10, 0), &chunkWriter{n: map[*percore.Conn]int{}})
	const chunks = 48
	c := dial(t, rt)
	for k := range chunks {
		if _, err := c.Write([]byte{1}); err != nil {
			t.Fatalf("write: %v", err)
		}
		// Pacing, not synchronisation: the check is the bytes below.
		for end := time.Now().Add(time.Second); time.Now().Before(end); {
			if rt.Stats().BytesOut >= uint64(k+1)*chunkSize {
				break
			}
			runtime.Gosched()
		}
	}
	got := make([]byte, chunkSize)
	for k := range chunks {
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatalf("chunk %d: %v", k, err)
		}
		for j, b := range got {
			if b != chunkByte(k, j) {
				t.Fatalf("chunk %d differs at byte %d: its buffer changed before the kernel was done with it", k, j)
			}
		}
	}
	if s := rt.Stats(); s.ZeroCopySends < chunks {
		t.Fatalf("%d zero-copy sends for %d chunks", s.ZeroCopySends, chunks)
	}
	stopAndCheckHeld(t, rt)
}

// TestZeroCopySendUnixFallback serves a Unix socket, which refuses
// zero-copy sends (-EOPNOTSUPP): the bytes go as plain sends, counted once
// for the connection.
func TestZeroCopySendUnixFallback(t *testing.T) {
	cfg := zcConfig(t, 16<<10, 0)
	path := filepath.Join(shortDir(t), "zc.sock")
	rt := startUnix(t, percore.IOURing, path, cfg, echoHandler{})
	c := dialUnix(t, path)
	for i, size := range []int{64 << 10, 300 << 10, 32 << 10} {
		p := bytes.Repeat([]byte{byte(i + 1), 2, 3}, size/3)
		got, err := roundTrip(c, p)
		if err != nil || !bytes.Equal(got, p) {
			t.Fatalf("echo of %d bytes over a Unix socket: %v (equal %v)", len(p), err, bytes.Equal(got, p))
		}
	}
	pctest.WaitFor(t, "the fallback counted", func() bool { return rt.Stats().ZeroCopyFallbacks == 1 })
	if s := rt.Stats(); s.ZeroCopySends != 1 {
		t.Errorf("%d zero-copy sends tried, want 1 (then plain sends only)", s.ZeroCopySends)
	}
	stopAndCheckHeld(t, rt)
}

// bigWriter writes size bytes on the first data, then closes; with abort
// it aborts instead, on the next data (its sends in flight).
type bigWriter struct {
	size  int
	abort bool
}

func (h bigWriter) OnData(c *percore.Conn, data []byte) {
	if h.abort && c.Buffered() > 0 {
		c.Abort()
		return
	}
	p := make([]byte, h.size)
	for j := range p {
		p[j] = byte(j)
	}
	c.Write(p)
	if !h.abort {
		c.Close()
	}
}

// TestZeroCopySendCloseMidWrite closes connections with zero-copy sends in
// flight: the peer resets in the middle of a large reply, the server
// aborts after queueing one, the runtime is shut down with one still
// queued. Each time the loop ends only once every notification came, and
// holds no buffer after.
func TestZeroCopySendCloseMidWrite(t *testing.T) {
	cases := []struct {
		name string
		h    bigWriter
		peer func(t *testing.T, c *net.TCPConn)
	}{
		{"peer resets", bigWriter{size: 8 << 20}, func(t *testing.T, c *net.TCPConn) {
			if _, err := io.ReadFull(c, make([]byte, 200<<10)); err != nil {
				t.Fatal(err)
			}
			c.SetLinger(0)
			c.Close()
		}},
		{"server aborts", bigWriter{size: 8 << 20, abort: true}, func(t *testing.T, c *net.TCPConn) {
			if _, err := io.ReadFull(c, make([]byte, 200<<10)); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Write([]byte{2}); err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, c) // to the reset
		}},
		{"shutdown while queued", bigWriter{size: 8 << 20}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rt := start(t, zcConfig(t, 16<<10, 0), tc.h)
			c := pctest.Dial(t, rt.Addr().String())
			if _, err := c.Write([]byte{1}); err != nil {
				t.Fatal(err)
			}
			if tc.peer != nil {
				tc.peer(t, c)
			} else {
				pctest.WaitFor(t, "a zero-copy send", func() bool { return rt.Stats().ZeroCopySends > 0 })
				go io.Copy(io.Discard, c) // the graceful stop sends what is queued
			}
			stopAndCheckHeld(t, rt)
			if s := rt.Stats(); s.ZeroCopySends == 0 {
				t.Error("no zero-copy send")
			}
		})
	}
}

// TestZeroCopySendUDP echoes datagrams below and above the threshold, one
// at a time and in a burst: those from the threshold on go with
// SENDMSG_ZC, every reply arrives whole, every notification comes (and
// reports the copy loopback makes), and the loop ends with no send slot
// held.
func TestZeroCopySendUDP(t *testing.T) {
	cfg := zcConfig(t, 4096, 0)
	rt := startUDP(t, percore.IOURing, "127.0.0.1:0", packetEcho{}, cfg)
	c := udpClient(t, rt)
	buf := make([]byte, 70000)
	zc := 0
	for _, n := range []int{1, 64, 4095, 4096, 16 << 10, 65507} {
		p := bytes.Repeat([]byte{byte(n), byte(n >> 8)}, n/2+1)[:n]
		if _, err := c.Write(p); err != nil {
			t.Fatalf("write %d: %v", n, err)
		}
		got, err := c.Read(buf)
		if err != nil || !bytes.Equal(buf[:got], p) {
			t.Fatalf("reply to %d bytes: %d bytes, %v (equal %v)", n, got, err, bytes.Equal(buf[:got], p))
		}
		if n >= 4096 {
			zc++
		}
	}
	// A burst: the replies of one turn take several slots at once. Small
	// enough for both sockets' receive buffers (UDP drops what they
	// cannot hold, and this is not a test of that).
	const burst = 8
	_ = c.SetReadBuffer(1 << 20)
	for k := range burst {
		p := bytes.Repeat([]byte{byte(k)}, 8<<10)
		if _, err := c.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[byte]bool{}
	for range burst {
		got, err := c.Read(buf)
		if err != nil {
			t.Fatalf("burst: %v (%d of %d replies)", err, len(seen), burst)
		}
		if got != 8<<10 || !bytes.Equal(buf[:got], bytes.Repeat(buf[:1], got)) || seen[buf[0]] {
			t.Fatalf("burst: a reply of %d bytes that is not one of the datagrams sent, whole and once", got)
		}
		seen[buf[0]] = true
	}
	zc += burst
	pctest.WaitFor(t, "every zero-copy datagram's notification", func() bool {
		s := rt.Stats()
		return s.ZeroCopySends == uint64(zc) && s.ZeroCopyCopied == uint64(zc)
	})
	stopAndCheckHeld(t, rt)
}

// zcHo is the hand-over tests' line protocol (hoHandler) that answers the
// line "big" with bigReply bytes, sent with zero copy.
type zcHo struct{ *hoHandler }

const bigReply = 1 << 20

func (h zcHo) OnData(c *percore.Conn, data []byte) {
	if string(data) != "big\n" {
		h.hoHandler.OnData(c, data)
		return
	}
	room := c.Reserve(bigReply)
	for j := range room {
		room[j] = byte(j * 7)
	}
	c.Commit(bigReply)
}

// TestZeroCopySendHandover hands a connection over right after a large
// reply went out with zero copy: the connection is idle once the kernel
// took the reply, maybe before its notifications came; the old runtime's
// loops end only after them, with nothing held, and the connection goes
// on in the new process.
func TestZeroCopySendHandover(t *testing.T) {
	cfg := zcConfig(t, 16<<10, 0)
	cfg.Addr, cfg.Cores = "127.0.0.1:0", allCores(t)[:1]
	old := start(t, cfg, zcHo{&hoHandler{name: "A"}})
	oldEnd, nextEnd, err := percore.HandoverSockets()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { oldEnd.Close(); nextEnd.Close() })
	c := dial(t, old)
	cl := &hoClient{c: c, r: bufio.NewReader(c), id: "z1"}
	if got, err := cl.ask(cl.id); err != nil || got != "ok A" {
		t.Fatalf("hello: %q, %v", got, err)
	}
	if _, err := c.Write([]byte("big\n")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, bigReply)
	if _, err := io.ReadFull(cl.r, got); err != nil {
		t.Fatal(err)
	}
	for j, b := range got {
		if b != byte(j*7) {
			t.Fatalf("the reply differs at byte %d", j)
		}
	}
	files, err := old.ListenerFiles()
	if err != nil {
		t.Fatal(err)
	}
	next := start(t, percore.Config{Backend: percore.IOURing, Inherited: files, Cores: cfg.Cores}, &hoHandler{name: "B"})
	for _, f := range files {
		f.Close()
	}
	if err := next.Adopt(nextEnd); err != nil {
		t.Fatal(err)
	}
	if err := old.HandOver(shutdownCtx(t, 20*time.Second), oldEnd); err != nil {
		t.Fatalf("hand-over: %v", err)
	}
	if got, err := cl.ask("after"); err != nil || got != "B z1 after" {
		t.Fatalf("after the hand-over: %q, %v", got, err)
	}
	if s := old.Stats(); s.HandedOff != 1 || s.ZeroCopySends == 0 {
		t.Fatalf("old runtime: %d handed over, %d zero-copy sends; want 1 and some", s.HandedOff, s.ZeroCopySends)
	}
	for _, l := range old.Loops() {
		if n, b := percore.ZeroCopyHeld(l); n != 0 || b != 0 {
			t.Errorf("the old loop ended with %d zero-copy sends unfinished, holding %d bytes", n, b)
		}
	}
}
