// Package wstest drives the WebSocket codec (runtime/frame/ws) over plain
// net.Conns and without a socket, for the codec's tests and for its interop
// tests against other implementations (examples/bench/wsinterop, a module
// of its own so that the library's go.mod does not require them): an echo
// endpoint fed bytes by hand (EchoPeer, the one the Autobahn table runs),
// that endpoint as a loopback server (EchoServer), a client (Dial), and the
// exchange every interop test runs (Exercise).
package wstest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/percore/percore/runtime/frame/http1"
	"github.com/percore/percore/runtime/frame/ws"
)

// EchoPeer is the endpoint under test, as an Autobahn fuzzingclient sees
// it: a server that echoes every message, answers pings and closes, and
// fails the connection with the code the codec gives. It runs without a
// socket: Feed it bytes, read what it wrote in Out.
type EchoPeer struct {
	C      ws.Conn
	Out    []byte // what the peer wrote; the caller empties it
	Closed bool   // the peer closed its TCP connection
	Err    error  // why the codec failed the connection, if it did
	in     []byte
}

// NewEchoPeer returns a peer in role over pool, after the handshake hs.
func NewEchoPeer(pool *ws.Pool, role ws.Role, hs *ws.Handshake) *EchoPeer {
	e := &EchoPeer{}
	e.C.Init(pool, role, hs)
	return e
}

// Feed hands the peer bytes received, and lets it answer.
func (e *EchoPeer) Feed(b []byte) {
	if e.Closed {
		return
	}
	e.in = append(e.in, b...)
	off := 0
	defer func() { e.in = append(e.in[:0], e.in[off:]...) }()
	for {
		n, ev, p, err := e.C.Next(e.in[off:])
		off += n
		if err != nil {
			e.Err = err
			var ce *ws.CloseError
			code := ws.CloseInternalError
			if errors.As(err, &ce) {
				code = ce.Code
			}
			e.writeClose(code)
			e.Closed = true
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
			e.Out, werr = e.C.AppendMessage(e.Out, op, p)
			if werr != nil {
				panic(werr)
			}
		case ws.Ping:
			var buf [ws.MaxHeaderLen + ws.MaxControlPayload]byte
			k, werr := e.C.PutControl(buf[:], ws.OpPong, p)
			if werr != nil {
				panic(werr)
			}
			e.Out = append(e.Out, buf[:k]...)
		case ws.Close:
			if !e.C.CloseSent() {
				e.writeClose(e.C.CloseCode())
			}
			// Both Closes are through: a server closes the TCP
			// connection (RFC 6455 7.1.1).
			e.Closed = true
			return
		}
	}
}

func (e *EchoPeer) writeClose(code ws.CloseCode) {
	var buf [ws.MaxHeaderLen + ws.MaxControlPayload]byte
	k, err := e.C.PutClose(buf[:], code, "")
	if err == nil {
		e.Out = append(e.Out, buf[:k]...)
	}
}

// EchoServer serves an EchoPeer per connection on a loopback port until the
// test ends and returns its address; each connection gets its own Pool (a
// Pool belongs to one goroutine).
func EchoServer(t testing.TB, cfg ws.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				if err := serveEcho(nc, cfg); err != nil && !errors.Is(err, io.EOF) {
					t.Logf("echo server: %v", err)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func serveEcho(nc net.Conn, cfg ws.Config) error {
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	pool := ws.NewPool(cfg)
	var head []byte
	buf := make([]byte, 64<<10)
	var req http1.Request
	for {
		n, err := nc.Read(buf)
		if err != nil {
			return err
		}
		head = append(head, buf[:n]...)
		ok, perr := http1.ParseRequest(head, &req, http1.Limits{})
		if perr != nil {
			nc.Write(http1.AppendError(nil, 400, perr.Error(), nil))
			return perr
		}
		if ok {
			break
		}
	}
	hs, herr := ws.Accept(&req, pool.Config())
	if herr != nil {
		nc.Write(ws.AppendRefusal(nil, herr, nil))
		return herr
	}
	if _, err := nc.Write(ws.AppendAccept(nil, &hs)); err != nil {
		return err
	}
	e := NewEchoPeer(pool, ws.Server, &hs)
	rest := head[req.HeadLen:]
	for {
		e.Feed(rest)
		if len(e.Out) > 0 {
			if _, err := nc.Write(e.Out); err != nil {
				return err
			}
			e.Out = e.Out[:0]
		}
		if e.Closed {
			return e.Err
		}
		n, err := nc.Read(buf)
		if err != nil {
			return err
		}
		rest = buf[:n]
	}
}

// Client is the codec on the client side of a net.Conn.
type Client struct {
	NC        net.Conn
	C         ws.Conn
	Handshake ws.Handshake // what the server agreed to
	held      []byte
	buf       []byte
}

// Dial connects to addr, runs the opening handshake for target with cfg and
// returns the client; the connection closes when the test ends.
func Dial(t testing.TB, addr, target string, cfg ws.Config) *Client {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	pool := ws.NewPool(cfg)
	key := ws.NewKey()
	if _, err := nc.Write(ws.AppendRequest(nil, addr, target, &key, pool.Config(), "")); err != nil {
		t.Fatal(err)
	}
	cl := &Client{NC: nc, buf: make([]byte, 64<<10)}
	var resp http1.Response
	for {
		n, err := nc.Read(cl.buf)
		if err != nil {
			t.Fatalf("reading the handshake answer: %v", err)
		}
		cl.held = append(cl.held, cl.buf[:n]...)
		ok, perr := http1.ParseResponse(cl.held, &resp, false, http1.Limits{})
		if perr != nil {
			t.Fatal(perr)
		}
		if ok {
			break
		}
	}
	hs, err := ws.CheckResponse(&resp, &key, pool.Config())
	if err != nil {
		t.Fatalf("handshake: %v (%q)", err, cl.held[:resp.HeadLen])
	}
	cl.Handshake = hs
	cl.held = append([]byte(nil), cl.held[resp.HeadLen:]...)
	cl.C.Init(pool, ws.Client, &hs)
	return cl
}

// Send writes one message.
func (cl *Client) Send(op ws.Opcode, p []byte) error {
	out, err := cl.C.AppendMessage(nil, op, p)
	if err != nil {
		return err
	}
	_, err = cl.NC.Write(out)
	return err
}

// Ping writes a ping with payload p.
func (cl *Client) Ping(p []byte) error {
	buf := make([]byte, ws.MaxHeaderLen+ws.MaxControlPayload)
	n, err := cl.C.PutControl(buf, ws.OpPing, p)
	if err != nil {
		return err
	}
	_, err = cl.NC.Write(buf[:n])
	return err
}

// Recv returns the next message or control frame, answering pings.
func (cl *Client) Recv() (ws.Event, []byte, error) {
	for {
		n, ev, p, err := cl.C.Next(cl.held)
		if err != nil {
			return 0, nil, err
		}
		if ev != ws.NeedMore {
			p = bytes.Clone(p)
			cl.held = cl.held[n:]
			if ev == ws.Ping {
				buf := make([]byte, ws.MaxHeaderLen+ws.MaxControlPayload)
				k, _ := cl.C.PutControl(buf, ws.OpPong, p)
				cl.NC.Write(buf[:k])
			}
			return ev, p, nil
		}
		cl.held = append([]byte(nil), cl.held[n:]...)
		k, err := cl.NC.Read(cl.buf)
		if err != nil {
			return 0, nil, err
		}
		cl.held = append(cl.held, cl.buf[:k]...)
	}
}

// Close runs the closing handshake from the client's side and returns the
// status the server echoed.
func (cl *Client) Close(code ws.CloseCode) (ws.CloseCode, error) {
	buf := make([]byte, ws.MaxHeaderLen+ws.MaxControlPayload)
	n, err := cl.C.PutClose(buf, code, "bye")
	if err != nil {
		return 0, err
	}
	if _, err := cl.NC.Write(buf[:n]); err != nil {
		return 0, err
	}
	for {
		ev, _, err := cl.Recv()
		if err != nil {
			return 0, err
		}
		if ev == ws.Close {
			break
		}
	}
	// The server closes the TCP connection.
	if _, err := cl.NC.Read(cl.buf); err != io.EOF {
		return 0, fmt.Errorf("after the close: %v, want EOF", err)
	}
	return cl.C.CloseCode(), nil
}

// Message is one message of an interop exchange.
type Message struct {
	Op      ws.Opcode
	Payload []byte
}

// Messages are what every interop test sends: empty, short, text with
// multi-byte code points, a binary message over 64 KiB, and a 1 MiB
// compressible text.
func Messages() []Message {
	var big strings.Builder
	for i := 0; big.Len() < 1<<20; i++ {
		fmt.Fprintf(&big, "{\"n\":%d,\"city\":\"Zürich\"}\n", i)
	}
	bin := make([]byte, 70000)
	for i := range bin {
		bin[i] = byte(i * 31)
	}
	return []Message{
		{ws.OpText, nil},
		{ws.OpText, []byte("hello")},
		{ws.OpText, []byte(strings.Repeat("Größe 𝄞 € ", 20))},
		{ws.OpBinary, bin},
		{ws.OpText, []byte(big.String())},
	}
}

// Exercise runs the client side against an echo server: every message and
// its echo (twice: context takeover carries over), a ping and its pong,
// then the closing handshake. wantDeflate is whether permessage-deflate
// must have been agreed.
func Exercise(t testing.TB, cl *Client, wantDeflate bool) {
	t.Helper()
	if cl.C.Compressed() != wantDeflate {
		t.Fatalf("permessage-deflate agreed: %v, want %v (%+v)", cl.C.Compressed(), wantDeflate, cl.Handshake.Deflate)
	}
	for round := range 2 {
		for i, m := range Messages() {
			if err := cl.Send(m.Op, m.Payload); err != nil {
				t.Fatal(err)
			}
			ev, p, err := cl.Recv()
			for err == nil && (ev == ws.Ping || ev == ws.Pong) {
				ev, p, err = cl.Recv()
			}
			if err != nil {
				t.Fatalf("round %d message %d: %v", round, i, err)
			}
			want := ws.Text
			if m.Op == ws.OpBinary {
				want = ws.Binary
			}
			if ev != want || !bytes.Equal(p, m.Payload) {
				t.Fatalf("round %d message %d: echo %v of %d bytes, want %v of %d", round, i, ev, len(p), want, len(m.Payload))
			}
		}
	}
	if err := cl.Ping([]byte("are you there")); err != nil {
		t.Fatal(err)
	}
	ev, p, err := cl.Recv()
	if err != nil || ev != ws.Pong || string(p) != "are you there" {
		t.Fatalf("pong: %v %q %v", ev, p, err)
	}
	code, err := cl.Close(4000)
	if err != nil {
		t.Fatal(err)
	}
	if code != 4000 && code != ws.CloseNormal {
		t.Fatalf("close echoed %d", code)
	}
}
