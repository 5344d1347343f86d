package tlsconn_test

import (
	"crypto/tls"
	"io"
	"net"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/percore/percore/runtime/tlsconn"
)

// The receive side of one connection, three ways, after the handshake, at
// the same message sizes (plaintext bytes/s, allocations per message):
//
//   - record: this package, Decrypt on the loop's goroutine.
//   - partial: crypto/tls over a non-blocking transport that hands it
//     whatever bytes are there (no whole-record gating): the tls.Conn keeps
//     partial records in its own buffer and each Read on one is wasted.
//   - bridge: crypto/tls on a goroutine of its own per connection, fed
//     through a pipe, its plaintext handed back over a channel (what a
//     percore user does today without this package).
//
// Each iteration delivers one message's ciphertext in 64 KiB reads, as a
// loop's receive buffer would, and collects all of its plaintext.

var benchSizes = []int{64, 1024, 16 << 10, 256 << 10}

// benchPool is the benchmarks' pool. Its threads keep their priority
// (SchedNormal): some benchmarks drive the handshake from a goroutine
// that polls with runtime.Gosched, which a lowered handshake thread on its
// CPU would wait behind.
func benchPool(b *testing.B) *tlsconn.Pool {
	pool := tlsconn.NewPool(tlsconn.PoolConfig{Sched: tlsconn.SchedNormal})
	b.Cleanup(func() { pool.Close() })
	return pool
}

// stream makes n messages of size bytes from a client session established
// with srv, cut into 64 KiB reads.
func stream(b *testing.B, cli *tlsconn.Session, size, n int) [][]byte {
	msg := make([]byte, size)
	var wire []byte
	for range n {
		var err error
		if wire, err = cli.Encrypt(wire, msg); err != nil {
			b.Fatal(err)
		}
	}
	var reads [][]byte
	for len(wire) > 0 {
		k := min(len(wire), 64<<10)
		reads = append(reads, wire[:k])
		wire = wire[k:]
	}
	return reads
}

func BenchmarkReceive(b *testing.B) {
	for _, size := range benchSizes {
		b.Run("record/"+strconv.Itoa(size), func(b *testing.B) { benchRecord(b, size) })
		b.Run("partial/"+strconv.Itoa(size), func(b *testing.B) { benchPartial(b, size) })
		b.Run("bridge/"+strconv.Itoa(size), func(b *testing.B) { benchBridge(b, size) })
	}
}

// batch is how many messages one stream carries (the streams are made
// before the timer, with the session's sequence numbers in order).
func batch(size int) int { return max(1, (4<<20)/size) }

func benchRecord(b *testing.B, size int) {
	pool := benchPool(b)
	b.ReportAllocs()
	var scratch []byte
	n := batch(size)
	b.SetBytes(int64(size * n))
	for b.Loop() {
		b.StopTimer()
		srv, cli := handshakePair(b, pool, serverConfig(b), clientConfig(b))
		reads := stream(b, cli, size, n)
		b.StartTimer()
		got := 0
		for _, r := range reads {
			p, err := srv.Decrypt(scratch[:0], r, 0)
			if err != nil {
				b.Fatal(err)
			}
			got += len(p)
			scratch = p[:0]
		}
		if got != size*n {
			b.Fatalf("got %d", got)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/msg")
}

func benchPartial(b *testing.B, size int) {
	pool := benchPool(b)
	b.ReportAllocs()
	n := batch(size)
	b.SetBytes(int64(size * n))
	buf := make([]byte, 64<<10)
	for b.Loop() {
		b.StopTimer()
		srv, cc, cli := chanPair(b, pool)
		cc.nonblock = true
		reads := stream(b, cli, size, n)
		b.StartTimer()
		got := 0
		for _, r := range reads {
			cc.rest = r
			for {
				k, err := srv.Read(buf)
				got += k
				if err != nil {
					break
				}
			}
		}
		if got != size*n {
			b.Fatalf("got %d", got)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/msg")
}

// chanConn is the bridge's transport: reads wait for what the loop sends
// over a channel; writes collect under a lock.
type chanConn struct {
	net.Conn
	in       chan []byte
	rest     []byte
	nonblock bool // after the handshake, for "partial": hand over what is there
	mu       sync.Mutex
	out      []byte
}

// tempErr is what a non-blocking chanConn returns with nothing to read.
type tempErr struct{}

func (tempErr) Error() string   { return "would block" }
func (tempErr) Timeout() bool   { return false }
func (tempErr) Temporary() bool { return true }

func (c *chanConn) Read(p []byte) (int, error) {
	if c.nonblock {
		if len(c.rest) == 0 {
			return 0, tempErr{}
		}
		n := copy(p, c.rest)
		c.rest = c.rest[n:]
		return n, nil
	}
	if len(c.rest) == 0 {
		r, ok := <-c.in
		if !ok {
			return 0, io.EOF
		}
		c.rest = r
	}
	n := copy(p, c.rest)
	c.rest = c.rest[n:]
	return n, nil
}

func (c *chanConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.out = append(c.out, p...)
	c.mu.Unlock()
	return len(p), nil
}

func (c *chanConn) take() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.out
	c.out = nil
	return out
}

func (c *chanConn) SetDeadline(time.Time) error      { return nil }
func (c *chanConn) SetWriteDeadline(time.Time) error { return nil }
func (c *chanConn) Close() error                     { return nil }

// chanPair establishes a crypto/tls server on a chanConn (its handshake on
// a goroutine: a temporary error during a handshake fails it for good, so
// only a blocking transport can carry one) with a client session driven
// here.
func chanPair(b *testing.B, pool *tlsconn.Pool) (*tls.Conn, *chanConn, *tlsconn.Session) {
	cc := &chanConn{in: make(chan []byte, 1024)}
	srv := tls.Server(cc, serverConfig(b))
	cli := tlsconn.Client(clientConfig(b), tlsconn.Options{Pool: pool})
	hsDone := make(chan error, 1)
	go func() { hsDone <- srv.Handshake() }()
	srvDone := false
	for {
		if out := cli.Output(nil); len(out) > 0 {
			cc.in <- out
		}
		if out := cc.take(); len(out) > 0 {
			if _, err := cli.Decrypt(nil, out, 0); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case err := <-hsDone:
			if err != nil {
				b.Fatal(err)
			}
			srvDone = true
		default:
		}
		if done, err := cli.HandshakeDone(); done && srvDone {
			if err != nil {
				b.Fatal(err)
			}
			return srv, cc, cli
		}
		runtime.Gosched()
	}
}

func benchBridge(b *testing.B, size int) {
	pool := benchPool(b)
	b.ReportAllocs()
	n := batch(size)
	b.SetBytes(int64(size * n))
	for b.Loop() {
		b.StopTimer()
		srv, cc, cli := chanPair(b, pool)
		reads := stream(b, cli, size, n)
		plain := make(chan int, 1024)
		go func() { // the bridge goroutine: a Read loop, plaintext handed back
			buf := make([]byte, 64<<10)
			for {
				k, err := srv.Read(buf)
				if k > 0 {
					plain <- k
				}
				if err != nil {
					close(plain)
					return
				}
			}
		}()
		b.StartTimer()
		got := 0
		for _, r := range reads {
			cc.in <- r
			for got < size*n && len(plain) > 0 {
				got += <-plain
			}
		}
		for got < size*n {
			got += <-plain
		}
		b.StopTimer()
		close(cc.in)
		for range plain {
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/msg")
}

// BenchmarkSend: Encrypt appending to a reused buffer.
func BenchmarkSend(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			pool := tlsconn.NewPool(tlsconn.PoolConfig{})
			b.Cleanup(func() { pool.Close() })
			srv, _ := handshakePair(b, pool, serverConfig(b), clientConfig(b))
			msg := make([]byte, size)
			var out []byte
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				var err error
				if out, err = srv.Encrypt(out[:0], msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHandshake: full handshakes through the pool (server and client
// sessions both here), per second of this machine.
func BenchmarkHandshake(b *testing.B) {
	pool := tlsconn.NewPool(tlsconn.PoolConfig{})
	b.Cleanup(func() { pool.Close() })
	scfg, ccfg := serverConfig(b), clientConfig(b)
	b.ReportAllocs()
	for b.Loop() {
		s, c := handshakePair(b, pool, scfg, ccfg)
		s.Close()
		c.Close()
	}
}
