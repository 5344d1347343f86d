package frame_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
)

// serve starts a one-loop runtime on 127.0.0.1:0 with h and closes it at
// cleanup.
func serve(t *testing.T, b percore.Backend, h percore.Handler) *percore.Runtime {
	t.Helper()
	return pctest.Start(t, percore.Config{Backend: b}, h)
}

// send writes the pieces in order, pausing between them so that the server
// receives them in separate reads (a pause, not synchronisation: the test
// passes however the pieces arrive).
func send(t *testing.T, c net.Conn, pause time.Duration, pieces ...[]byte) {
	t.Helper()
	for i, p := range pieces {
		if i > 0 {
			time.Sleep(pause)
		}
		if _, err := c.Write(p); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
}

// readToEnd reads until the server closes the connection. A close with
// unread bytes in the server's receive queue is a reset, which counts as
// closed too.
func readToEnd(t *testing.T, c net.Conn) string {
	t.Helper()
	var b bytes.Buffer
	_, err := b.ReadFrom(c)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after %q: %v", b.String(), err)
	}
	return b.String()
}

// lineEcho answers every line with "line:LINE" and a too-long line with
// "error: line too long"; it counts lines per connection in its own value.
type lineEcho struct {
	errs *pctest.Inbox[error]
}

func (h *lineEcho) OnOpen(c *percore.Conn) { c.SetValue(new(int)) }

func (h *lineEcho) OnFrame(c *percore.Conn, line []byte) {
	*c.Value().(*int)++
	frame.WriteLine(c, append([]byte("line:"), line...))
}

func (h *lineEcho) OnFrameError(c *percore.Conn, err error) {
	c.Write([]byte("error: line too long\n"))
	h.errs.Put(err)
}

func TestLinesOverTCP(t *testing.T) {
	tests := []struct {
		name   string
		pieces []string
		want   string
	}{
		{"one line in two pieces 50 ms apart", []string{"hel", "lo\n"}, "line:hello\n"},
		{"three lines in one write", []string{"a\nbb\r\nccc\n"}, "line:a\nline:bb\nline:ccc\n"},
		{"end and start in one write", []string{"pi", "ng\npo", "ng\n"}, "line:ping\nline:pong\n"},
		{"unfinished line dropped at the end", []string{"x\ny"}, "line:x\n"},
	}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := serve(t, b, frame.Lines(&lineEcho{errs: pctest.NewInbox[error]()}, frame.LineConfig{MaxLine: 1024}))
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				c := pctest.Dial(t, rt.Addr().String())
				var pieces [][]byte
				for _, p := range tt.pieces {
					pieces = append(pieces, []byte(p))
				}
				send(t, c, 50*time.Millisecond, pieces...)
				// Read the replies before ending the stream: the server
				// closes at the end of it, and nothing more may follow.
				got := make([]byte, len(tt.want))
				if _, err := io.ReadFull(c, got); err != nil {
					t.Fatalf("read %q: %v", got, err)
				}
				c.CloseWrite()
				if rest := readToEnd(t, c); string(got)+rest != tt.want {
					t.Fatalf("replies %q, want %q", string(got)+rest, tt.want)
				}
			})
		}
	})
}

func TestLineTooLong(t *testing.T) {
	const limit = 1024
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		h := &lineEcho{errs: pctest.NewInbox[error]()}
		rt := serve(t, b, frame.Lines(h, frame.LineConfig{MaxLine: limit}))
		c := pctest.Dial(t, rt.Addr().String())
		send(t, c, 0, []byte("ok\n"), bytes.Repeat([]byte("a"), 10000))
		if got, want := readToEnd(t, c), "line:ok\nerror: line too long\n"; got != want {
			t.Fatalf("replies %q, want %q", got, want)
		}
		err := h.errs.Next(t, "OnFrameError")
		var tl *frame.TooLongError
		if !errors.As(err, &tl) || !errors.Is(err, frame.ErrTooLong) {
			t.Fatalf("OnFrameError got %v, want a *TooLongError", err)
		}
		// The line was rejected from the first read that took it past
		// the limit: the decoder held at most limit bytes (the unit tests
		// check that read by read).
		if tl.Limit != limit || tl.Got <= limit || tl.Got > 10000 {
			t.Fatalf("TooLongError %+v, want Limit %d and %d < Got <= 10000", *tl, limit, limit)
		}
	})
}

func TestFrameErrorWithoutHook(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := serve(t, b, frame.Lines(frame.HandlerFunc(func(c *percore.Conn, line []byte) {
			frame.WriteLine(c, line)
		}), frame.LineConfig{MaxLine: 8}))
		c := pctest.Dial(t, rt.Addr().String())
		send(t, c, 0, []byte("short\nmuch too long\n"))
		if got := readToEnd(t, c); got != "short\n" {
			t.Fatalf("replies %q, want only the short line's", got)
		}
	})
}

// frameEcho sends every payload back as a frame, and an error frame for a
// frame over the limit.
type frameEcho struct {
	errs *pctest.Inbox[error]
}

func (h *frameEcho) OnFrame(c *percore.Conn, payload []byte) { frame.WriteFrame(c, payload) }

func (h *frameEcho) OnFrameError(c *percore.Conn, err error) {
	frame.WriteFrame(c, []byte("error: frame too long"))
	h.errs.Put(err)
}

func TestLengthPrefixedOverTCP(t *testing.T) {
	hello := frame.AppendFrame(nil, []byte("hello"))
	several := frame.AppendFrame(frame.AppendFrame(frame.AppendFrame(nil, []byte("a")), nil), []byte("bcd"))
	tests := []struct {
		name   string
		pieces [][]byte
		want   []byte
	}{
		{"split in the header", [][]byte{hello[:2], hello[2:]}, hello},
		{"split in the payload", [][]byte{hello[:6], hello[6:]}, hello},
		{"split everywhere", [][]byte{hello[:1], hello[1:4], hello[4:7], hello[7:]}, hello},
		{"several frames in one write", [][]byte{several}, several},
	}
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := serve(t, b, frame.LengthPrefixed(&frameEcho{errs: pctest.NewInbox[error]()}, frame.LengthConfig{MaxFrame: 1024}))
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				c := pctest.Dial(t, rt.Addr().String())
				send(t, c, 50*time.Millisecond, tt.pieces...)
				got := make([]byte, len(tt.want))
				if _, err := io.ReadFull(c, got); err != nil {
					t.Fatalf("read %q: %v", got, err)
				}
				c.CloseWrite()
				if rest := readToEnd(t, c); !bytes.Equal(append(got, rest...), tt.want) {
					t.Fatalf("replies %q, want %q", append(got, rest...), tt.want)
				}
			})
		}
	})
}

// TestLengthHeaderTooLong sends only a header declaring too much: the
// server answers and closes without waiting for (or buffering) a payload.
func TestLengthHeaderTooLong(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		h := &frameEcho{errs: pctest.NewInbox[error]()}
		rt := serve(t, b, frame.LengthPrefixed(h, frame.LengthConfig{MaxFrame: 1024}))
		c := pctest.Dial(t, rt.Addr().String())
		send(t, c, 0, []byte{0, 0x10, 0, 0}) // 1 MiB
		want := frame.AppendFrame(nil, []byte("error: frame too long"))
		if got := readToEnd(t, c); got != string(want) {
			t.Fatalf("replies %q, want %q", got, want)
		}
		var tl *frame.TooLongError
		if err := h.errs.Next(t, "OnFrameError"); !errors.As(err, &tl) || tl.Got != 1<<20 || tl.Limit != 1024 {
			t.Fatalf("OnFrameError got %v, want a TooLongError for 1 MiB over 1024", err)
		}
	})
}

// hooked records the optional callbacks it receives.
type hooked struct {
	mu     sync.Mutex
	events []string
	closed chan struct{}
}

func (h *hooked) record(e string) {
	h.mu.Lock()
	h.events = append(h.events, e)
	h.mu.Unlock()
}

func (h *hooked) OnOpen(*percore.Conn) { h.record("open") }
func (h *hooked) OnFrame(c *percore.Conn, line []byte) {
	h.record("line " + string(line))
}
func (h *hooked) OnEOF(c *percore.Conn) {
	h.record("eof")
	c.Write([]byte("bye\n"))
	c.Close()
}
func (h *hooked) OnClose(c *percore.Conn, err error) {
	h.record("close")
	close(h.closed)
}

// TestHooksForwarded: OnOpen, OnEOF (which keeps a half-closed connection
// open to write a goodbye) and OnClose reach the wrapped handler.
func TestHooksForwarded(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		h := &hooked{closed: make(chan struct{})}
		rt := serve(t, b, frame.Lines(h, frame.LineConfig{}))
		c := pctest.Dial(t, rt.Addr().String())
		send(t, c, 0, []byte("hi\n"))
		c.CloseWrite()
		if got := readToEnd(t, c); got != "bye\n" {
			t.Fatalf("after the half-close read %q, want the goodbye", got)
		}
		pctest.Recv(t, h.closed, "OnClose")
		h.mu.Lock()
		defer h.mu.Unlock()
		if got, want := strings.Join(h.events, ","), "open,line hi,eof,close"; got != want {
			t.Fatalf("callbacks %s, want %s", got, want)
		}
	})
}
