//go:build linux

package resp

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
)

// The two ways of reading commands that docs/decisions/0018 compares:
//
//   - split: frame.Split with ScanCommand hands over each whole command,
//     and the handler reads its arguments with Args (a second pass over
//     the command's headers);
//   - view: frame.View shows the handler every unconsumed byte (the held
//     bytes and the new read, made contiguous) and the handler parses
//     commands in place with Parse, consuming what it took (gnet's
//     Peek/Discard); the adapter keeps the rest.
//
// Both run the same work per command (look at the name, the key, the
// value) on a connection that is not on a loop.

// work is the handler's per-command work: enough to read every argument.
type work struct {
	gets, sets, bytes int
	args              [][]byte
}

func (w *work) command(args [][]byte) {
	switch {
	case len(args) == 2 && bytes.EqualFold(args[0], []byte("GET")):
		w.gets++
		w.bytes += len(args[1])
	case len(args) == 3 && bytes.EqualFold(args[0], []byte("SET")):
		w.sets++
		w.bytes += len(args[1]) + len(args[2])
	}
}

func (w *work) OnFrame(_ *percore.Conn, cmd []byte) {
	w.args = Args(w.args[:0], cmd)
	w.command(w.args)
}

// OnView parses every whole command of in and returns how many bytes they
// took.
func (w *work) OnView(_ *percore.Conn, in []byte) (int, error) {
	done := 0
	for {
		args, n, err := Parse(w.args[:0], in[done:], Limits{})
		if err != nil || n == 0 {
			return done, err
		}
		w.args = args
		w.command(args)
		done += n
	}
}

// commands returns n pipelined commands, alternating SET and GET of keys
// with values of size bytes.
func commands(n, size int) []byte {
	var b []byte
	value := string(bytes.Repeat([]byte("v"), size))
	for i := range n {
		key := "key:" + strconv.Itoa(100000+i)
		if i%2 == 0 {
			b = AppendCommand(b, "SET", key, value)
		} else {
			b = AppendCommand(b, "GET", key)
		}
	}
	return b
}

// reads cuts buf into the reads OnData gets: whole, or cut in two at an
// odd place inside a command (so that one command spans the two reads).
func reads(buf []byte, cut bool) [][]byte {
	if !cut {
		return [][]byte{buf}
	}
	i := len(buf)/2 + 3
	return [][]byte{buf[:i], buf[i:]}
}

func BenchmarkCommands(b *testing.B) {
	for _, mode := range []string{"split", "view"} {
		for _, n := range []int{1, 16} {
			for _, size := range []int{16, 1024} {
				for _, cut := range []bool{false, true} {
					name := fmt.Sprintf("%s/cmds=%d/value=%d/", mode, n, size)
					if cut {
						name += "cut"
					} else {
						name += "whole"
					}
					buf := commands(n, size)
					b.Run(name, func(b *testing.B) { benchCommands(b, mode, buf, reads(buf, cut), n) })
				}
			}
		}
	}
}

func benchCommands(b *testing.B, mode string, buf []byte, pieces [][]byte, n int) {
	w := &work{}
	var h percore.Handler
	switch mode {
	case "split":
		h = frame.Split(ScanCommand(Limits{}), w, frame.SplitConfig{MaxBuffered: 1 << 20})
	case "view":
		h = frame.View(w, frame.SplitConfig{MaxBuffered: 1 << 20})
	}
	var c percore.Conn
	if o, ok := h.(percore.OpenHandler); ok {
		o.OnOpen(&c)
	}
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		for _, p := range pieces {
			h.OnData(&c, p)
		}
	}
	if w.gets+w.sets != n*b.N {
		b.Fatalf("%d commands read, want %d", w.gets+w.sets, n*b.N)
	}
}

// TestBothWaysAgree runs the benchmarks' inputs through both ways once.
func TestBothWaysAgree(t *testing.T) {
	for _, n := range []int{1, 16} {
		for _, cut := range []bool{false, true} {
			buf := commands(n, 100)
			var counts [2][3]int
			for i, mode := range []string{"split", "view"} {
				w := &work{}
				h := frame.View(w, frame.SplitConfig{})
				if mode == "split" {
					h = frame.Split(ScanCommand(Limits{}), w, frame.SplitConfig{})
				}
				var c percore.Conn
				if o, ok := h.(percore.OpenHandler); ok {
					o.OnOpen(&c)
				}
				for range 3 {
					for _, p := range reads(buf, cut) {
						h.OnData(&c, p)
					}
				}
				counts[i] = [3]int{w.gets, w.sets, w.bytes}
			}
			if counts[0] != counts[1] || counts[0][0]+counts[0][1] != 3*n {
				t.Fatalf("%d commands, cut %v: split read %v, view %v", n, cut, counts[0], counts[1])
			}
		}
	}
}
