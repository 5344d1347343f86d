package ws_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/percore/percore/runtime/frame/http1"
	"github.com/percore/percore/runtime/frame/ws"
)

// A tiny test-only adapter that drives the codec over a plain net.Conn,
// for the interop tests (the runtime's integration is another package's
// work): an echo server (the same echoPeer the Autobahn table uses), and a
// client.

// echoServer serves the codec as an echo server on a loopback port until
// the test ends; each connection gets its own Pool (a Pool belongs to one
// goroutine).
func echoServer(t *testing.T, cfg ws.Config) string {
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
	e := newEchoPeer(pool, ws.Server, &hs)
	rest := head[req.HeadLen:]
	for {
		e.feed(rest)
		if len(e.out) > 0 {
			if _, err := nc.Write(e.out); err != nil {
				return err
			}
			e.out = e.out[:0]
		}
		if e.closed {
			return e.err
		}
		n, err := nc.Read(buf)
		if err != nil {
			return err
		}
		rest = buf[:n]
	}
}

// client is the codec on the client side of a net.Conn.
type client struct {
	nc   net.Conn
	c    ws.Conn
	held []byte
	buf  []byte
	hs   ws.Handshake
}

func dial(t *testing.T, addr, target string, cfg ws.Config) *client {
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
	cl := &client{nc: nc, buf: make([]byte, 64<<10)}
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
	cl.hs = hs
	cl.held = append([]byte(nil), cl.held[resp.HeadLen:]...)
	cl.c.Init(pool, ws.Client, &hs)
	return cl
}

func (cl *client) send(op ws.Opcode, p []byte) error {
	out, err := cl.c.AppendMessage(nil, op, p)
	if err != nil {
		return err
	}
	_, err = cl.nc.Write(out)
	return err
}

func (cl *client) ping(p []byte) error {
	buf := make([]byte, ws.MaxHeaderLen+ws.MaxControlPayload)
	n, err := cl.c.PutControl(buf, ws.OpPing, p)
	if err != nil {
		return err
	}
	_, err = cl.nc.Write(buf[:n])
	return err
}

// recv returns the next message or control frame, answering pings.
func (cl *client) recv() (ws.Event, []byte, error) {
	for {
		n, ev, p, err := cl.c.Next(cl.held)
		if err != nil {
			return 0, nil, err
		}
		if ev != ws.NeedMore {
			p = bytes.Clone(p)
			cl.held = cl.held[n:]
			if ev == ws.Ping {
				buf := make([]byte, ws.MaxHeaderLen+ws.MaxControlPayload)
				k, _ := cl.c.PutControl(buf, ws.OpPong, p)
				cl.nc.Write(buf[:k])
			}
			return ev, p, nil
		}
		cl.held = append([]byte(nil), cl.held[n:]...)
		k, err := cl.nc.Read(cl.buf)
		if err != nil {
			return 0, nil, err
		}
		cl.held = append(cl.held, cl.buf[:k]...)
	}
}

// close runs the closing handshake from the client's side and returns the
// status the server echoed.
func (cl *client) close(code ws.CloseCode) (ws.CloseCode, error) {
	buf := make([]byte, ws.MaxHeaderLen+ws.MaxControlPayload)
	n, err := cl.c.PutClose(buf, code, "bye")
	if err != nil {
		return 0, err
	}
	if _, err := cl.nc.Write(buf[:n]); err != nil {
		return 0, err
	}
	for {
		ev, _, err := cl.recv()
		if err != nil {
			return 0, err
		}
		if ev == ws.Close {
			break
		}
	}
	// The server closes the TCP connection.
	if _, err := cl.nc.Read(cl.buf); err != io.EOF {
		return 0, fmt.Errorf("after the close: %v, want EOF", err)
	}
	return cl.c.CloseCode(), nil
}
