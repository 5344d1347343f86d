package runtime_test

import (
	"fmt"
	"net"
	"strconv"
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

// Cross-loop calls that allocate nothing once warm: each loop has its own
// OpPool, made in LoopSetup; a call's state is the Op's V, filled before
// Call, computed on the loop that owns the key, and read back on the
// caller's loop.
func ExampleOpPool() {
	type square struct{ n, sq int }
	var pools percore.PerLoop[*percore.OpPool[square]]
	sum, left := 0, 100
	done := make(chan struct{})
	rt, err := percore.New(percore.Config{Logger: discard, LoopSetup: func(l *percore.Loop) error {
		pools.Set(l, percore.NewOpPool(l,
			func(on *percore.Loop, v *square) { v.sq = v.n * v.n }, // on the owner
			func(v *square, err error) { // back on l
				if err == nil {
					sum += v.sq
				}
				if left--; left == 0 {
					close(done)
				}
			}))
		return nil
	}}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	l := rt.Loops()[0]
	l.Post(func() {
		pool := *pools.Get(l)
		for i := range 100 {
			o := pool.Get()
			o.V.n = i
			pool.Call(l.OwnerOf(strconv.Itoa(i)), o)
		}
	})
	select {
	case <-done:
		fmt.Println("sum of the squares of 0 to 99:", sum)
	case <-time.After(10 * time.Second):
		fmt.Println("timed out")
	}
	// Output: sum of the squares of 0 to 99: 328350
}
