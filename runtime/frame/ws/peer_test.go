package ws_test

import (
	"errors"

	"github.com/percore/percore/runtime/frame/ws"
)

// echoPeer is the endpoint under test, as an Autobahn fuzzingclient sees
// it: a server that echoes every message, answers pings and closes, and
// fails the connection with the code the codec gives. It runs without a
// socket: feed it bytes, read what it wrote in out.
type echoPeer struct {
	c      ws.Conn
	in     []byte
	out    []byte
	closed bool // the peer closed its TCP connection
	err    error
}

func newEchoPeer(pool *ws.Pool, role ws.Role, hs *ws.Handshake) *echoPeer {
	e := &echoPeer{}
	e.c.Init(pool, role, hs)
	return e
}

// feed hands the peer bytes received, and lets it answer.
func (e *echoPeer) feed(b []byte) {
	if e.closed {
		return
	}
	e.in = append(e.in, b...)
	off := 0
	defer func() { e.in = append(e.in[:0], e.in[off:]...) }()
	for {
		n, ev, p, err := e.c.Next(e.in[off:])
		off += n
		if err != nil {
			e.err = err
			var ce *ws.CloseError
			code := ws.CloseInternalError
			if errors.As(err, &ce) {
				code = ce.Code
			}
			e.writeClose(code)
			e.closed = true
			return
		}
		switch ev {
		case ws.NeedMore:
			return
		case ws.Text, ws.Binary:
			op := ws.OpText
			if ev == ws.Binary {
				op = ws.OpBinary
			}
			var werr error
			e.out, werr = e.c.AppendMessage(e.out, op, p)
			if werr != nil {
				panic(werr)
			}
		case ws.Ping:
			var buf [ws.MaxHeaderLen + ws.MaxControlPayload]byte
			k, werr := e.c.PutControl(buf[:], ws.OpPong, p)
			if werr != nil {
				panic(werr)
			}
			e.out = append(e.out, buf[:k]...)
		case ws.Close:
			if !e.c.CloseSent() {
				e.writeClose(e.c.CloseCode())
			}
			// Both Closes are through: a server closes the TCP
			// connection (RFC 6455 7.1.1).
			e.closed = true
			return
		}
	}
}

func (e *echoPeer) writeClose(code ws.CloseCode) {
	var buf [ws.MaxHeaderLen + ws.MaxControlPayload]byte
	k, err := e.c.PutClose(buf[:], code, "")
	if err == nil {
		e.out = append(e.out, buf[:k]...)
	}
}
