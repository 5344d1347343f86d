package runtime_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"time"

	percore "github.com/percore/percore/runtime"
)

// counter answers each line with its process's name and the count of
// lines its connection has sent, which crosses a restart as the state.
type counter struct{ name string }

func (h counter) OnOpen(c *percore.Conn) { c.SetValue(0) }

func (h counter) OnData(c *percore.Conn, data []byte) {
	n := c.Value().(int) + 1 // one line per read here
	c.SetValue(n)
	fmt.Fprintf(c, "%s %d\n", h.name, n)
}

// OnHandover: between lines the connection holds only its count.
func (counter) OnHandover(c *percore.Conn) ([]byte, error) {
	return []byte{byte(c.Value().(int))}, nil
}

// OnAdopt: the count comes back in the new process.
func (counter) OnAdopt(c *percore.Conn, state []byte) { c.SetValue(int(state[0])) }

// A restart, in one process for the example: the new runtime serves the
// old one's listeners and adopts its connections; the client's connection
// stays open and its count goes on. (Between processes, the files and the
// new end of the channel go to the child as descriptors: see
// examples/multi and docs/operations.md.)
func ExampleRuntime_HandOver() {
	old, err := percore.New(percore.Config{Addr: "127.0.0.1:0", Logger: discard}, counter{"old"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer old.Close()
	c, err := net.Dial("tcp", old.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	rd := bufio.NewReader(c)
	ask := func() {
		c.Write([]byte("hi\n"))
		line, _ := rd.ReadString('\n')
		fmt.Print(line)
	}
	ask()
	ask()

	files, _ := old.ListenerFiles()
	next, err := percore.New(percore.Config{Inherited: files, Logger: discard}, counter{"new"})
	for _, f := range files {
		f.Close()
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer next.Close()
	oldEnd, nextEnd, _ := percore.HandoverSockets()
	defer oldEnd.Close()
	defer nextEnd.Close()
	next.Adopt(nextEnd)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := old.HandOver(ctx, oldEnd); err != nil {
		fmt.Println(err)
		return
	}
	ask()
	// Output:
	// old 1
	// old 2
	// new 3
}
