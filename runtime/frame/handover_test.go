package frame_test

import (
	"bufio"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
)

// subLines is a line protocol with per-connection state (the last "sub"
// line), which crosses a hand-over as its state.
type subLines struct{ name string }

func (h subLines) OnFrame(c *percore.Conn, line []byte) {
	if len(line) > 4 && string(line[:4]) == "sub " {
		c.SetValue(string(line[4:]))
	}
	sub, _ := c.Value().(string)
	fmt.Fprintf(c, "%s %s %s\n", h.name, sub, line)
}

func (subLines) OnHandover(c *percore.Conn) ([]byte, error) {
	sub, _ := c.Value().(string)
	return []byte(sub), nil
}

func (subLines) OnAdopt(c *percore.Conn, state []byte) { c.SetValue(string(state)) }

// A Lines connection moves with its state between lines: one holding half
// a line waits for the rest, which the old process answers; the next line
// is the new process's, with the state the old one had.
func TestLinesHandover(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		old := pctest.Start(t, percore.Config{Backend: b}, frame.Lines(subLines{"A"}, frame.LineConfig{}))
		c := pctest.Dial(t, old.Addr().String())
		rd := bufio.NewReader(c)
		ask := func(line, want string) {
			t.Helper()
			if _, err := c.Write([]byte(line)); err != nil {
				t.Fatal(err)
			}
			if got, err := rd.ReadString('\n'); err != nil || got != want {
				t.Fatalf("%q: %q, %v; want %q", line, got, err, want)
			}
		}
		ask("sub news\n", "A news sub news\n")
		files, err := old.ListenerFiles()
		if err != nil {
			t.Fatal(err)
		}
		next := pctest.Start(t, percore.Config{Backend: b, Inherited: files}, frame.Lines(subLines{"B"}, frame.LineConfig{}))
		for _, f := range files {
			f.Close()
		}
		oldEnd, nextEnd, err := percore.HandoverSockets()
		if err != nil {
			t.Fatal(err)
		}
		defer oldEnd.Close()
		defer nextEnd.Close()
		if err := next.Adopt(nextEnd); err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("hal"))
		pctest.WaitFor(t, "the old process to hold half a line", func() bool { return old.Stats().BytesIn == 12 })
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			done <- old.HandOver(ctx, oldEnd)
		}()
		ask("f\n", "A news half\n")
		if err := pctest.Recv(t, done, "the hand-over"); err != nil {
			t.Fatal(err)
		}
		ask("more\n", "B news more\n")
		if st := old.Stats(); st.HandedOff != 1 {
			t.Fatalf("handed %d", st.HandedOff)
		}
	})
}
