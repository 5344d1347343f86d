package runtime_test

import (
	"fmt"
	"net"
	"time"

	percore "github.com/percore/percore/runtime"
)

// An echo server on every CPU the process may use, each loop with its own
// listener on one shared port.
func Example() {
	rt, err := percore.New(percore.Config{Addr: "127.0.0.1:0", Logger: discard},
		percore.HandlerFunc(func(c *percore.Conn, data []byte) { c.Write(data) }))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()

	c, err := net.Dial("tcp", rt.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte("hello"))
	buf := make([]byte, 5)
	n, _ := c.Read(buf)
	fmt.Println(string(buf[:n]))
	// Output: hello
}

// Other goroutines reach a loop only through Post.
func ExampleLoop_Post() {
	rt, err := percore.New(percore.Config{Logger: discard}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	l := rt.Loops()[0]
	done := make(chan struct{})
	l.Post(func() {
		l.AfterFunc(0, func() {
			fmt.Println("ran on loop", l.ID())
			close(done)
		})
	})
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		fmt.Println("timed out")
	}
	// Output: ran on loop 0
}
