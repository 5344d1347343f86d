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
//	x := upstream.NewExchange(local, nil, upstream.ExchangeConfig{Timeout: time.Second,
//		Scanner: func() frame.Scanner { return frame.NewLineScanner(1024) }})
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
// A reply's split function may be any bufio.SplitFunc; a frame.Scanner
// (ExchangeConfig.Scanner: frame.NewLineScanner, resp.NewReplyScanner)
// keeps its progress through a partial reply, so that one that arrives in
// many reads costs work linear in its size.
//
// ExchangeConfig follows the runtime's rule: a field's zero value means its
// default (the Default constants), a negative limit or timeout means none.
//
// Everything here runs on the thread of the loop that dialed the
// connection.
//
// It builds on Linux only, as the runtime does.
package upstream
