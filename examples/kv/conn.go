//go:build linux

package main

import (
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame/ordered"
	"github.com/percore/percore/runtime/frame/resp"
)

// client is one connection.
type client struct {
	s     *server
	c     *percore.Conn
	sh    *shard // the client's loop's
	q     *ordered.Queue[join]
	p     resp.Parser // the progress through a partial command
	args  [][]byte
	pos   []int    // a command's key positions
	multi [][]byte // a command's keys
	tmp   []byte
	resp3 bool
}

func (s *server) OnOpen(c *percore.Conn) {
	c.SetValue(&client{s: s, c: c, sh: s.shards.Get(c.Loop()), q: ordered.New[join](c)})
}

// OnView runs every whole command of in and returns the bytes they took.
// The parser keeps its progress through a partial command, so that a
// command that arrives in many reads is read once (issue 23).
func (s *server) OnView(c *percore.Conn, in []byte) (int, error) {
	cl := c.Value().(*client)
	scanned := cl.p.Scanned()
	defer func() { cl.sh.parsed += cl.p.Scanned() - scanned }()
	done := 0
	for done < len(in) && !cl.q.Closing() {
		args, n, err := cl.p.Parse(cl.args[:0], in[done:], s.lim)
		if err != nil {
			// Redis answers the commands before the bad one, then
			// the error, then closes.
			cl.sendTmp(resp.AppendError(cl.tmp[:0], "ERR "+err.Error()))
			cl.q.CloseWhenDone()
			return len(in), nil
		}
		if n == 0 {
			break
		}
		cl.args = args
		done += n
		if len(args) > 0 {
			cl.command(args)
		}
	}
	if cap(cl.args) > maxKeptArgs {
		cl.args = nil // a command of many arguments: do not keep its room for the connection's life
	}
	if cl.q.Closing() {
		cl.p.Reset()
		return len(in), nil
	}
	return done, nil
}

// maxKeptArgs bounds the room for arguments a connection keeps between
// reads.
const maxKeptArgs = 1024

// OnFrameError answers a request over the buffer limit; frame.View then
// closes the connection.
func (s *server) OnFrameError(c *percore.Conn, err error) {
	c.Write([]byte("-ERR Protocol error: request longer than the server's buffer\r\n"))
}

// OnEOF closes once the replies on their way are written.
func (s *server) OnEOF(c *percore.Conn) { c.Value().(*client).q.CloseWhenDone() }

// OnShutdown does the same for a graceful shutdown.
func (s *server) OnShutdown(c *percore.Conn) { c.Value().(*client).q.CloseWhenDone() }

func (s *server) OnClose(c *percore.Conn, _ error) {
	if cl, ok := c.Value().(*client); ok {
		cl.q.Gone()
	}
}
