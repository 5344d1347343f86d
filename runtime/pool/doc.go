// Package pool is percore's per-loop connection pool (after compio-pool and
// bb8; docs/decisions/0010-connection-pool.md).
//
// A Pool is the blueprint: built once from a Manager and a Config, safe for
// concurrent use, it holds no connections. Pool.Local returns a loop's own
// pool, created on first use from that loop: an idle list (newest first), a
// count of slots and a first-come-first-served queue of gets, touched only by
// the loop's thread, with no lock and no shared atomic on the get and return
// path.
//
//	// upstream.Conn and its Manager are in runtime/pool/upstream: TCP
//	// connections a loop dials to one address.
//	m, err := upstream.New("127.0.0.1:6379")
//	p, err := pool.New[*upstream.Conn](m, pool.Config{MaxSize: 4})
//	...
//	// On the loop's thread (a handler, a timer, a posted function):
//	local := p.Local(conn.Loop())
//	local.Get(func(lease pool.Lease[*upstream.Conn], err error) {
//		if err != nil { ... } // pool.ErrTimeout, pool.ErrClosed or a connect error
//		use(lease.Conn())
//		local.Put(lease) // later, when the exchange is over
//	})
//
// upstream.Exchange does the usual use: send a request, read one reply
// framed by a split function, with a timeout, and Put.
//
// The package does not import the runtime: a loop is anything that
// implements Loop, which *percore.Loop does.
//
// # Get and Put
//
// Get reuses the newest idle connection (dropping expired and broken ones
// and, with test on checkout, validating it and dropping one that fails),
// else opens one while the loop has a free slot, else queues. Queued gets
// are served in arrival order, a returned connection goes straight to the
// oldest of them, and a get that arrives while others wait queues behind
// them. The connection timeout bounds the whole get: waiting, validating and
// connecting. A connect error goes at once to the get that asked for the
// connection and frees its slot. Put returns a connection: a broken,
// expired or cleared one is closed, as is every one returned after Close.
//
// Expiry is lazy, checked on get and on return; Maintain (reap expired idle
// connections, then warm up to MinIdle) runs on a per-loop timer every
// Config.ReapInterval.
//
// # Numbers
//
// A Local counts in plain fields (Local.State and Local.Statistics read
// them on its loop) and publishes them whenever its loop publishes its own
// counters (Loop.OnPublish: at the end of each turn), under a sequence
// lock. Pool.Snapshot sums what the loops published, from any goroutine,
// without asking them: each loop's numbers are of one moment between its
// callbacks, so Created == Closed() + Connections holds in every snapshot.
//
// # Threads
//
// Pool's methods are safe for concurrent use, except Local, which must be
// called on the loop's thread it names; Snapshot may be called on a loop's
// thread too. A Local's methods, its Leases and
// the callbacks it runs (a get's done, and the Manager's methods) belong to
// that loop's thread.
//
// # Caveats
//
//   - Go has no destructors: every Lease a get hands out must come back
//     through Put, or its slot stays taken. A Lease is one lend: after its
//     Put it is stale (a second Put is ignored, also once the connection is
//     lent again, and Conn returns the zero C), so keep the Lease, not the
//     connection, and do not use the connection after Put.
//   - MaxSize and MinIdle are per loop: a pool on eight loops may hold
//     eight times MaxSize connections. Size the upstream for that.
//   - A get's done may run before Get returns (when an idle connection is
//     ready, or a Manager answers at once).
//   - A connection whose exchange was cut short (a timeout, a peer that went
//     away mid-request) is out of step with its protocol: the Manager must
//     report it Broken so that Put closes it instead of lending it again.
package pool
