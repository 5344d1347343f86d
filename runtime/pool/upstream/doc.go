// Package upstream is a pool.Manager for TCP connections that a percore
// loop dials to one upstream address: the connections tcp_pool and fanout
// lease, ready for a request and its reply.
//
//	m, err := upstream.New("127.0.0.1:6379")
//	p, err := pool.New[*upstream.Conn](m, pool.Config{MaxSize: 8})
//
// For a request and its one reply, an Exchange does it all: it sends the
// request, reads exactly one reply framed by a split function (as
// frame.Split frames a client's input), with a timeout, and puts the lease
// back, marked broken when the reply timed out, was cut short, too long,
// followed by more bytes or the connection closed:
//
//	x := upstream.NewExchange(local, frame.ScanLines(1024), upstream.ExchangeConfig{Timeout: time.Second})
//	local.Get(func(lease pool.Lease[*upstream.Conn], err error) {
//		if err != nil { ... }
//		x.Do(lease, []byte("GET k\n"), func(reply []byte, err error) { ... })
//	})
//
// By hand, a lessee writes its request with Conn.Write, receives the reply through
// the callbacks it gives Conn.Receive, and calls Receive(nil, nil) once the
// reply is complete, before it puts the connection back. A connection put
// back with a receiver still attached (its reply may still be on the way),
// one that received bytes while nobody was listening, one marked broken and
// one that closed are all reported broken, so that the pool closes them
// instead of lending them again.
//
// Everything here runs on the thread of the loop that dialed the
// connection.
//
// It builds on Linux only, as the runtime does.
package upstream
