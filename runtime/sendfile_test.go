package runtime_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/percore/percore/internal/leakcheck"
	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// fileSender answers each request line "off len\n" with "<", the range of
// its file, and ">" (written after SendFile: it must follow the file), and
// reports each transfer's result, and whether the connection still held
// its side state when done ran (the file send's own is given back by then:
// decision 0075).
type fileSender struct {
	f       *percore.File
	results chan sendResult
}

type sendResult struct {
	sent int64
	err  error
	side bool
}

func (h *fileSender) OnData(c *percore.Conn, data []byte) {
	var off, n int64
	if _, err := fmt.Sscanf(string(data), "%d %d", &off, &n); err != nil {
		c.Close()
		return
	}
	c.Write([]byte("<"))
	done := func(sent int64, err error) { h.results <- sendResult{sent, err, percore.HoldsSideState(c)} }
	if err := c.SendFile(h.f, off, n, done); err != nil {
		h.results <- sendResult{-1, err, false}
		return
	}
	c.Write([]byte(">"))
}

// sendFileServer starts a loop that serves content with fileSender.
func sendFileServer(t *testing.T, b percore.Backend, content []byte) (*percore.Runtime, *fileSender) {
	t.Helper()
	name := filepath.Join(t.TempDir(), "content")
	must(t, os.WriteFile(name, content, 0o644))
	h := &fileSender{results: make(chan sendResult, 16)}
	rt := start(t, percore.Config{Backend: b}, h)
	l := rt.Loops()[0]
	type ores struct {
		f   *percore.File
		err error
	}
	r := await(t, l, func(done func(ores)) {
		l.OpenFile(name, os.O_RDONLY, 0, func(f *percore.File, err error) {
			h.f = f // on the loop's thread, where OnData reads it
			done(ores{f, err})
		})
	})
	must(t, r.err)
	return rt, h
}

func TestSendFile(t *testing.T) {
	content := make([]byte, 3<<20+123) // more than a pipe and a chunk
	for i := range content {
		content[i] = byte(i*31 + i>>9)
	}
	for _, fallback := range []bool{false, true} {
		t.Run(fmt.Sprintf("fallback=%v", fallback), func(t *testing.T) {
			pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
				rt, h := sendFileServer(t, b, content)
				percore.SetSendFallback(rt, fallback)
				c := dial(t, rt)
				ranges := []struct{ off, n int64 }{
					{0, int64(len(content))},
					{1000, 10},
					{int64(len(content)) - 7, 7}, // the end of the file
					{5, 0},
				}
				for _, r := range ranges {
					fmt.Fprintf(c, "%d %d\n", r.off, r.n)
					got := make([]byte, r.n+2)
					if _, err := io.ReadFull(c, got); err != nil {
						t.Fatalf("range %d+%d: %v", r.off, r.n, err)
					}
					want := append(append([]byte("<"), content[r.off:r.off+r.n]...), '>')
					if !bytes.Equal(got, want) {
						t.Fatalf("range %d+%d: got %d bytes that differ from the file's (first %q)", r.off, r.n, len(got), got[:min(len(got), 8)])
					}
					res := pctest.Recv(t, h.results, "send result")
					if res.err != nil || res.sent != r.n {
						t.Fatalf("range %d+%d: done(%d, %v)", r.off, r.n, res.sent, res.err)
					}
					if res.side {
						t.Fatalf("range %d+%d: the connection still holds a side state once its file send ended", r.off, r.n)
					}
				}
				var total int64
				for _, r := range ranges {
					total += r.n
				}
				pctest.WaitFor(t, "the send counters", func() bool { return rt.Stats().FileSendBytes == uint64(total) })
				s := rt.Stats()
				if s.FileSendBytes != uint64(total) {
					t.Errorf("FileSendBytes = %d, want %d", s.FileSendBytes, total)
				}
				if (s.FileSendFallbacks > 0) != fallback {
					t.Errorf("FileSendFallbacks = %d with the fallback forced %v", s.FileSendFallbacks, fallback)
				}
			})
		})
	}
}

// TestSendFilePastEnd asks for more than the file holds: the peer gets
// what there is, then the connection closes, and done reports
// io.ErrUnexpectedEOF.
func TestSendFilePastEnd(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt, h := sendFileServer(t, b, []byte("0123456789"))
		c := dial(t, rt)
		fmt.Fprintf(c, "6 10\n")
		got, err := io.ReadAll(c)
		if err != nil || string(got) != "<6789" {
			t.Errorf("read %q, %v; want %q then the end of the stream", got, err, "<6789")
		}
		res := pctest.Recv(t, h.results, "send result")
		if res.sent != 4 || !errors.Is(res.err, io.ErrUnexpectedEOF) {
			t.Errorf("done(%d, %v), want 4 and io.ErrUnexpectedEOF", res.sent, res.err)
		}
	})
}

// TestSendFileDisconnect has the client go away in the middle of a large
// file: done reports an error, the connection closes, and every
// descriptor (sockets, pipes) is back to the baseline once the runtime
// stops.
func TestSendFileDisconnect(t *testing.T) {
	content := make([]byte, 32<<20)
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		baseline := leakcheck.OpenFDs()
		func() {
			rt, h := sendFileServer(t, b, content)
			for range 3 {
				c := dial(t, rt)
				fmt.Fprintf(c, "0 %d\n", len(content))
				if _, err := io.ReadFull(c, make([]byte, 100<<10)); err != nil {
					t.Fatal(err)
				}
				c.Close()
				res := pctest.Recv(t, h.results, "send result")
				if res.err == nil || res.sent >= int64(len(content)) {
					t.Errorf("done(%d, %v) after the client left", res.sent, res.err)
				}
			}
			pctest.WaitFor(t, "the connections to close", func() bool { return rt.Stats().Open == 0 })
			rt.Close()
		}()
		if err := leakcheck.Check(baseline, 1<<30, 5*time.Second); err != nil {
			t.Error(err)
		}
	})
}

// shapeStep is one step of a sendfile shape: a write of n bytes (file
// false), or a send of n bytes of the file from off; then, the steps
// that the send's done function takes.
type shapeStep struct {
	file   bool
	vec    bool // a write as Writev of two buffers
	commit bool // a write built in place (Reserve, Commit)
	off, n int64
	then   []shapeStep
}

func sw(n int64) shapeStep { return shapeStep{n: n} }
func sf(off, n int64, then ...shapeStep) shapeStep {
	return shapeStep{file: true, off: off, n: n, then: then}
}

// shapeServer runs a shape's steps on the first request, and says when it
// has run them.
type shapeServer struct {
	f     *percore.File
	steps []shapeStep
	ran   chan error
	seq   int // writes made, for their contents
}

func (h *shapeServer) OnData(c *percore.Conn, _ []byte) {
	h.run(c, h.steps)
	h.ran <- nil
}

// writeBytes is the content of the i'th write of a shape: n bytes that
// name it, so that a reordering shows.
func writeBytes(i int, n int64) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(i*7 + j%251)
	}
	return b
}

func (h *shapeServer) run(c *percore.Conn, steps []shapeStep) {
	for _, s := range steps {
		if !s.file {
			p := writeBytes(h.seq, s.n)
			h.seq++
			switch {
			case s.vec:
				c.Writev(p[:len(p)/2], p[len(p)/2:])
			case s.commit:
				copy(c.Reserve(len(p)), p)
				c.Commit(len(p))
			default:
				c.Write(p)
			}
			continue
		}
		then := s.then
		if err := c.SendFile(h.f, s.off, s.n, func(sent int64, err error) {
			if err != nil {
				h.ran <- fmt.Errorf("done(%d, %v)", sent, err)
				return
			}
			h.run(c, then)
		}); err != nil {
			h.ran <- err
		}
	}
}

// shapeBytes is what the peer must read of steps, in order.
func shapeBytes(content []byte, steps []shapeStep, seq *int) []byte {
	var out []byte
	var thens [][]shapeStep
	for _, s := range steps {
		if s.file {
			out = append(out, content[s.off:s.off+s.n]...)
			thens = append(thens, s.then)
			continue
		}
		out = append(out, writeBytes(*seq, s.n)...)
		*seq++
	}
	// A done function runs after the steps of the callback that sent
	// its file; its writes follow everything written before it ran.
	for _, then := range thens {
		out = append(out, shapeBytes(content, then, seq)...)
	}
	return out
}

// TestSendFileShapes sends files around queued writes, as a new user
// would, to a peer that reads only once the server has queued all of it
// (so that every write and file send meets a full socket), and checks that
// the peer gets every byte once, in order: a file send that starts from a
// draining queue keeps waiting for writability (it stalled), and bytes
// written during a file send go out after it (they were stranded).
func TestSendFileShapes(t *testing.T) {
	content := make([]byte, 16<<20)
	for i := range content {
		content[i] = byte(i*31 + i>>11)
	}
	shapes := []struct {
		name  string
		steps []shapeStep
	}{
		{"two writes then a large file", []shapeStep{sw(100), sw(200), sf(0, 16<<20), sw(10)}},
		{"a large write, a small file, one byte", []shapeStep{sw(8 << 20), sf(1000, 10), sw(1)}},
		{"a file, writes during it, a file from done", []shapeStep{
			sf(0, 4<<20, sw(3), sf(10, 2<<20, sw(1)), sw(7)),
			sw(5), {vec: true, n: 3000}, {commit: true, n: 70000},
		}},
		{"a file with nothing queued, then a large write", []shapeStep{sf(5, 1<<20), sw(3 << 20)}},
	}
	for _, fallback := range []bool{false, true} {
		t.Run(fmt.Sprintf("fallback=%v", fallback), func(t *testing.T) {
			pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
				for _, shape := range shapes {
					t.Run(shape.name, func(t *testing.T) {
						name := filepath.Join(t.TempDir(), "content")
						must(t, os.WriteFile(name, content, 0o644))
						h := &shapeServer{steps: shape.steps, ran: make(chan error, 8)}
						// A stall ends in the write timeout, not the test's.
						rt := start(t, percore.Config{Backend: b, WriteTimeout: 3 * time.Second}, h)
						percore.SetSendFallback(rt, fallback)
						l := rt.Loops()[0]
						must(t, await(t, l, func(done func(error)) {
							l.OpenFile(name, os.O_RDONLY, 0, func(f *percore.File, err error) { h.f = f; done(err) })
						}))
						seq := 0
						want := shapeBytes(content, shape.steps, &seq)
						c := pctest.Dial(t, rt.Addr().String())
						c.SetDeadline(time.Now().Add(10 * time.Second))
						c.SetReadBuffer(32 << 10)
						fmt.Fprintf(c, "go\n")
						if err := pctest.Recv(t, h.ran, "the shape's steps"); err != nil {
							t.Fatal(err)
						}
						got := make([]byte, len(want))
						n, err := io.ReadFull(c, got)
						if err != nil {
							if i := firstDiff(got[:n], want[:n]); i < n {
								t.Fatalf("read %d of %d bytes (byte %d differs): %v", n, len(want), i, err)
							}
							t.Fatalf("read %d of %d bytes, in order: %v", n, len(want), err)
						}
						if !bytes.Equal(got, want) {
							i := firstDiff(got, want)
							t.Fatalf("byte %d of %d differs", i, len(want))
						}
					})
				}
			})
		})
	}
}
