package pool_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"time"

	"github.com/percore/percore/cpu"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/pool"
	"github.com/percore/percore/runtime/pool/upstream"
)

// A loop leases an upstream connection, sends a line, reads the reply and
// puts the connection back.
func Example() {
	quiet := slog.New(slog.DiscardHandler)
	cores, err := cpu.Cores()
	if err != nil {
		fmt.Println(err)
		return
	}
	echo, err := percore.New(percore.Config{Addr: "127.0.0.1:0", Cores: cores[:1], Logger: quiet},
		percore.HandlerFunc(func(c *percore.Conn, data []byte) { c.Write(data) }))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer echo.Close()

	m, err := upstream.New(echo.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := pool.New[*upstream.Conn](m, pool.Config{MaxSize: 4})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	rt, err := percore.New(percore.Config{Cores: cores[:1], Logger: quiet}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()

	loop := rt.Loops()[0]
	done := make(chan string, 1) // the loop must never wait for us
	loop.Post(func() {
		local := p.Local(loop) // a handler would keep this per connection
		local.Get(func(lease pool.Lease[*upstream.Conn], err error) {
			if err != nil {
				done <- err.Error()
				return
			}
			uc := lease.Conn()
			var reply []byte
			uc.Receive(func(data []byte) {
				if reply = append(reply, data...); bytes.IndexByte(reply, '\n') >= 0 {
					uc.Receive(nil, nil) // the exchange is over
					local.Put(lease)
					done <- string(reply)
				}
			}, func(err error) {
				local.Put(lease) // closed: the pool drops it
				done <- err.Error()
			})
			uc.Write([]byte("hello\n"))
		})
	})
	select {
	case reply := <-done:
		fmt.Print(reply)
	case <-time.After(10 * time.Second):
		fmt.Println("timed out")
	}
	// Output: hello
}
