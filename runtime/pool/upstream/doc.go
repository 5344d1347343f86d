// Package upstream is a pool.Manager for TCP connections that a percore
// loop dials to one upstream address: the connections tcp_pool and fanout
// lease, ready for a request and its reply.
//
//	m, err := upstream.New("127.0.0.1:6379")
//	p, err := pool.New[*upstream.Conn](m, pool.Config{MaxSize: 8})
//
// A lessee writes its request with Conn.Write, receives the reply through
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
