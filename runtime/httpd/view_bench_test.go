//go:build linux

package httpd

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame/http1"
)

// BenchmarkView is the package's own work for a read of pipelined
// plaintext requests, without the kernel's or a client's: OnView is
// called on the loop's thread over the same input again and again (the
// answers go out at the end of each loop turn, to a client that discards
// them), so that ns/req is the decoding, routing, handler and in-place
// answer of each request (cpu-ns/req: the loop thread's CPU time in the
// calls alone). The codec rows are the floor: http1's decoder
// and an answer appended per request, written once per read (what
// examples/http did before this package). Allocations are 0.
func BenchmarkView(b *testing.B) {
	plain := NewHead(200, "Content-Type", "text/plain")
	m := NewMux()
	m.HandleFunc("GET /plaintext", func(w *Response, r *Request) { w.SendString(plain, "Hello, World!") })
	m.HandleFunc("GET /plaintext/write", func(w *Response, r *Request) {
		w.AddHeader("Content-Type", "text/plain")
		w.WriteString("Hello, World!")
	})
	for _, depth := range []int{1, 16} {
		for _, path := range []string{"/plaintext", "/plaintext/write"} {
			name := "httpd" + path[len("/plaintext"):] + "/P" + itoa(depth)
			b.Run(name, func(b *testing.B) {
				srv := New(Config{Logger: pctest.QuietLogger(b)}, m)
				b.Cleanup(srv.Close)
				benchView(b, srv.Handler(), srv.OnView, path, depth)
			})
		}
		b.Run("codec/P"+itoa(depth), func(b *testing.B) {
			f := newCodecFloor()
			benchView(b, f, f.OnView, "/plaintext", depth)
		})
		b.Run("codec-reserve/P"+itoa(depth), func(b *testing.B) {
			f := newCodecFloor()
			f.reserve = true
			benchView(b, f, f.OnView, "/plaintext", depth)
		})
	}
}

func itoa(n int) string {
	return string(bytes.TrimLeft([]byte{byte('0' + n/10), byte('0' + n%10)}, "0"))
}

// benchView runs view over depth pipelined requests for path on the
// server side of one loopback connection to h.
func benchView(b *testing.B, h percore.Handler, view func(*percore.Conn, []byte) (int, error), path string, depth int) {
	opened := make(chan *percore.Conn, 1)
	rt := pctest.Start(b, percore.Config{Backend: percore.Epoll, Cores: []int{0}}, &openSpy{h, opened})
	nc, err := net.Dial("tcp", rt.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nc.Close() })
	go io.Copy(io.Discard, nc)
	c := <-opened
	in := bytes.Repeat([]byte("GET "+path+" HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n"), depth)
	const reads = 64 // per loop turn: their answers go out in one write
	done := make(chan error, 1)
	var cpu time.Duration // the loop thread's, in the calls
	turn := func() {
		t0 := threadCPU()
		for range reads {
			if n, err := view(c, in); err != nil || n != len(in) {
				done <- err
				return
			}
		}
		cpu += threadCPU() - t0
		done <- nil
	}
	run := func() {
		if err := c.Loop().Post(turn); err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	for range 20 {
		run()
	}
	b.ReportAllocs()
	cpu = 0
	for b.Loop() {
		run()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*reads*depth), "ns/req")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*reads*depth), "cpu-ns/req")
}

// threadCPU returns the calling thread's CPU time (the loop's, in its
// calls: a figure the other work on the machine moves less than the
// elapsed time).
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		panic(err)
	}
	return time.Duration(ts.Nano())
}

// openSpy is h, telling opened of the connection it opens.
type openSpy struct {
	percore.Handler
	opened chan *percore.Conn
}

func (o *openSpy) OnOpen(c *percore.Conn) {
	if oh, ok := o.Handler.(percore.OpenHandler); ok {
		oh.OnOpen(c)
	}
	o.opened <- c
}

func (o *openSpy) OnClose(c *percore.Conn, err error) {
	if ch, ok := o.Handler.(percore.CloseHandler); ok {
		ch.OnClose(c, err)
	}
}

// codecFloor answers plaintext requests with http1's decoder and an
// answer appended per request, the answers of a read written at once.
// With reserve, the answers are appended in place in the connection's
// outbound queue (Conn.Reserve, one Commit per read: httpd's way) instead:
// the A/B of gathering a read's answers in a buffer of the loop's and
// writing them once.
type codecFloor struct {
	d       http1.RequestDecoder
	date    http1.Date
	out     []byte
	reserve bool
}

func newCodecFloor() *codecFloor { return &codecFloor{out: make([]byte, 0, 32<<10)} }

func (f *codecFloor) OnData(c *percore.Conn, data []byte) {}

func (f *codecFloor) OnView(c *percore.Conn, in []byte) (int, error) {
	f.out = f.out[:0]
	if f.reserve {
		f.out = c.Reserve(viewRoom)[:0:viewRoom]
	}
	off := 0
	for {
		n, ev, _, err := f.d.Next(in[off:])
		off += n
		if err != nil {
			return off, err
		}
		switch ev {
		case http1.Head:
			if string(f.d.Request().Target) != "/plaintext" {
				return off, io.ErrUnexpectedEOF
			}
		case http1.End:
			f.out = append(f.out, "HTTP/1.1 200 OK\r\nServer: percore\r\nDate: "...)
			f.out = append(f.out, f.date.Get(c.Loop().Now())...)
			f.out = append(f.out, "\r\nContent-Type: text/plain\r\n"...)
			f.out = http1.AppendContentLength(f.out, 13)
			f.out = append(f.out, "\r\nHello, World!"...)
		case http1.NeedMore:
			if f.reserve {
				c.Commit(len(f.out))
				f.out = nil
			} else {
				c.Write(f.out)
			}
			return off, nil
		}
	}
}
