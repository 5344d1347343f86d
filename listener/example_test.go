package listener_test

import (
	"fmt"

	"github.com/percore/percore/listener"
)

// One listener per loop on one port: each loop accepts on its own Fd, and
// the kernel spreads the connections across them.
func ExampleGroup() {
	ls, err := listener.Group("tcp", "127.0.0.1:0", []int{0, 1}, listener.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	fmt.Println(len(ls), "listeners share a port:", ls[0].Addr().String() == ls[1].Addr().String())
	// Output: 2 listeners share a port: true
}

// Code built on the standard library can take a net.Listener over the same
// socket.
func ExampleListener_NetListener() {
	l, err := listener.Listen("tcp", "127.0.0.1:0", listener.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	ln, err := l.NetListener() // for example for http.Serve(ln, handler)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ln.Close()
	fmt.Println(ln.Addr().String() == l.Addr().String())
	// Output: true
}
