//go:build linux

package main

import (
	"errors"
	"strings"
	"time"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
	"github.com/percore/percore/runtime/pool"
	"github.com/percore/percore/runtime/pool/upstream"
)

// front is the handler of client connections, behind frame.Split: its
// callbacks run on the client's loop, one request line at a time.
type front struct {
	pool    *pool.Pool[*upstream.Conn]
	timeout time.Duration
	maxLine int
	lines   func() frame.Scanner // request and reply lines, newline kept: one per stream
}

// The callbacks frame.Split forwards, checked by the compiler.
var (
	_ frame.Handler        = (*front)(nil)
	_ frame.ErrorHandler   = (*front)(nil)
	_ percore.OpenHandler  = (*front)(nil)
	_ percore.CloseHandler = (*front)(nil)
)

func newFront(p *pool.Pool[*upstream.Conn], timeout time.Duration, maxLine int) percore.Handler {
	f := &front{pool: p, timeout: timeout, maxLine: maxLine}
	f.lines = func() frame.Scanner { return rawLines{frame.NewLineScanner(maxLine - 1)} }
	return frame.Split(nil, f, frame.SplitConfig{MaxBuffered: maxLine, Scanner: f.lines})
}

// rawLines splits lines of at most max bytes, newline included, into
// tokens that keep their newline: what the upstream gets and what the
// client gets back. A LineScanner underneath searches a line that arrives
// in pieces once.
type rawLines struct{ *frame.LineScanner }

func (r rawLines) Scan(data []byte, atEOF bool) (int, []byte, error) {
	adv, tok, err := r.LineScanner.Scan(data, atEOF)
	if tok != nil {
		tok = data[:adv]
	}
	return adv, tok, err
}

func (f *front) OnOpen(c *percore.Conn) {
	local := f.pool.Local(c.Loop())
	cl := &client{c: c, local: local,
		x: upstream.NewExchange(local, nil, upstream.ExchangeConfig{MaxReply: f.maxLine, Timeout: f.timeout, Scanner: f.lines})}
	// Bound once per client, so that a request allocates nothing for them.
	cl.gotFn, cl.replyFn = cl.got, cl.replied
	c.SetValue(cl)
}

// OnFrame starts a request: the client's next lines wait (in the adapter,
// then in the kernel) until it is answered.
func (f *front) OnFrame(c *percore.Conn, line []byte) {
	cl := c.Value().(*client)
	frame.PauseRead(c)
	c.BeginRequest() // a graceful shutdown waits for its answer
	cl.req = append(cl.req[:0], line...)
	cl.local.Get(cl.gotFn)
}

// OnFrameError answers a request line over -max-line; frame.Split then
// closes the client.
func (f *front) OnFrameError(c *percore.Conn, _ error) {
	c.Write([]byte("ERR request line too long\n"))
}

func (f *front) OnClose(c *percore.Conn, _ error) {
	if cl, ok := c.Value().(*client); ok {
		cl.closed = true
		cl.x.Cancel() // a reply on its way would find nobody: the connection goes back broken
	}
}

// client is one client connection and its request in flight.
type client struct {
	c      *percore.Conn
	local  *pool.Local[*upstream.Conn]
	x      *upstream.Exchange
	req    []byte
	closed bool

	gotFn   func(pool.Lease[*upstream.Conn], error)
	replyFn func([]byte, error)
}

// got receives the lease for the request in flight.
func (cl *client) got(ls pool.Lease[*upstream.Conn], err error) {
	switch {
	case cl.closed:
		if ls.Lent() {
			cl.local.Put(ls)
		}
	case err != nil:
		cl.answer([]byte("ERR " + strings.ReplaceAll(err.Error(), "\n", " ") + "\n"))
	default:
		cl.x.Do(ls, cl.req, cl.replyFn)
	}
}

// replied answers the client with the upstream's reply line, or says why
// there is none (the lease is back in the pool already, broken if need be).
func (cl *client) replied(reply []byte, err error) {
	switch {
	case err == nil:
		cl.answer(reply)
	case errors.Is(err, upstream.ErrReplyTimeout):
		cl.answer([]byte("ERR upstream timeout\n"))
	case errors.Is(err, frame.ErrTooLong):
		cl.answer([]byte("ERR upstream reply too long\n"))
	default:
		cl.answer([]byte("ERR upstream closed: " + strings.ReplaceAll(err.Error(), "\n", " ") + "\n"))
	}
}

// answer writes the answer to the request in flight and lets the next one
// start. The answered request ends only after the next one, if any, began,
// so that a graceful shutdown does not close the client between two of its
// pipelined requests.
func (cl *client) answer(p []byte) {
	if cl.closed {
		return
	}
	cl.c.Write(p)
	frame.ResumeRead(cl.c)
	cl.c.EndRequest()
}
