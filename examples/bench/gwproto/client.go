package gwproto

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// Opcodes of RFC 6455.
const (
	OpContinuation = 0x0
	OpText         = 0x1
	OpBinary       = 0x2
	OpClose        = 0x8
	OpPing         = 0x9
	OpPong         = 0xA
)

// StatusError is a handshake the server answered with a status other than
// 101 (401 for a bad token).
type StatusError struct {
	Code int
	Line string
}

func (e *StatusError) Error() string { return "websocket handshake: " + e.Line }

// CloseError is a Close frame received from the server.
type CloseError struct {
	Code   int // 1005 when the frame had no code
	Reason string
}

func (e *CloseError) Error() string {
	return fmt.Sprintf("websocket: the server closed with %d %q", e.Code, e.Reason)
}

// Client is a minimal WebSocket client of the gateway protocol: one
// connection, read by one goroutine (ReadMessage answers Pings on the
// way), written by any (writes are serialised). It is written here, not
// taken from a library, so that the load tool's cost per connection is
// small and known (a net.Conn, a 256-byte read buffer that grows only for
// larger frames, and this struct) and so that it judges every gateway,
// percore's included, with a codec none of them uses. It speaks what the
// protocol needs: no extensions, no subprotocols.
type Client struct {
	conn net.Conn
	buf  []byte // buf[r:w] is read and not yet consumed
	r, w int
	msg  []byte // a fragmented message being joined
	// Pings counts the Pings the server sent (each answered with a Pong).
	Pings int
	// NoPong makes ReadMessage leave Pings unanswered (a test's dead peer).
	NoPong bool

	wmu  sync.Mutex
	wbuf []byte
	seed uint64
}

// URL returns the path and query of the handshake for user under secret.
func URL(secret, user string) string {
	return "/ws?user=" + url.QueryEscape(user) + "&token=" + Token(secret, user)
}

// Dial connects to addr and performs the opening handshake for target
// (URL(secret, user)), all within timeout.
func Dial(addr, target string, timeout time.Duration) (*Client, error) {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c, err := Handshake(conn, addr, target, timeout)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

// Handshake performs the opening handshake on conn.
func Handshake(conn net.Conn, host, target string, timeout time.Duration) (*Client, error) {
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, err
	}
	key := base64.StdEncoding.EncodeToString(raw[:])
	c := &Client{conn: conn, buf: make([]byte, 256), seed: binary.LittleEndian.Uint64(raw[:8]) | 1}
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	req := "GET " + target + " HTTP/1.1\r\nHost: " + host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + key + "\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		return nil, err
	}
	var end int
	for {
		if i := bytes.Index(c.buf[:c.w], []byte("\r\n\r\n")); i >= 0 {
			end = i + 4
			break
		}
		if c.w == len(c.buf) {
			if len(c.buf) >= 16<<10 {
				return nil, errors.New("websocket handshake: response head over 16 KiB")
			}
			c.buf = append(c.buf, make([]byte, len(c.buf))...)
		}
		n, err := conn.Read(c.buf[c.w:])
		c.w += n
		if err != nil {
			if c.w > 0 && errors.Is(err, io.EOF) {
				if line, _, _ := bytes.Cut(c.buf[:c.w], []byte("\r\n")); len(line) > 12 {
					code, _ := strconv.Atoi(string(line[9:12]))
					return nil, &StatusError{Code: code, Line: string(line)}
				}
			}
			return nil, err
		}
	}
	if err := checkResponse(c.buf[:end], key); err != nil {
		return nil, err
	}
	c.r = end
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return c, nil
}

func checkResponse(head []byte, key string) error {
	tp := bufio.NewReader(bytes.NewReader(head))
	line, err := tp.ReadString('\n')
	if err != nil {
		return err
	}
	line = string(bytes.TrimRight([]byte(line), "\r\n"))
	if len(line) < 12 || line[:5] != "HTTP/" {
		return fmt.Errorf("websocket handshake: bad status line %q", line)
	}
	code, _ := strconv.Atoi(line[9:12])
	if code != 101 {
		return &StatusError{Code: code, Line: line}
	}
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	want := base64.StdEncoding.EncodeToString(h[:])
	var upgrade, accept bool
	for {
		l, err := tp.ReadString('\n')
		if err != nil {
			break
		}
		name, value, ok := bytes.Cut(bytes.TrimRight([]byte(l), "\r\n"), []byte(":"))
		if !ok {
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Upgrade")):
			upgrade = bytes.EqualFold(value, []byte("websocket"))
		case bytes.EqualFold(name, []byte("Sec-WebSocket-Accept")):
			accept = string(value) == want
		case bytes.EqualFold(name, []byte("Sec-WebSocket-Extensions")):
			return fmt.Errorf("websocket handshake: the server chose extensions %q that were not offered", value)
		}
	}
	if !upgrade || !accept {
		return fmt.Errorf("websocket handshake: 101 without Upgrade: websocket (%v) or the right Sec-WebSocket-Accept (%v)", upgrade, accept)
	}
	return nil
}

// Conn returns the underlying connection (for deadlines and Close).
func (c *Client) Conn() net.Conn { return c.conn }

// Close closes the TCP connection without a closing handshake.
func (c *Client) Close() error { return c.conn.Close() }

// fill reads until buf[r:w] holds at least n bytes.
func (c *Client) fill(n int) error {
	for c.w-c.r < n {
		if c.r > 0 && len(c.buf)-c.r < n {
			c.w = copy(c.buf, c.buf[c.r:c.w])
			c.r = 0
		}
		if len(c.buf) < n {
			nb := make([]byte, max(n, 2*len(c.buf)))
			c.w = copy(nb, c.buf[c.r:c.w])
			c.r = 0
			c.buf = nb
		}
		m, err := c.conn.Read(c.buf[c.w:])
		c.w += m
		if err != nil && c.w-c.r < n {
			return err
		}
	}
	return nil
}

// ReadMessage returns the next text or binary message (op OpText or
// OpBinary); p is valid until the next call. It answers Pings (unless
// NoPong) and skips Pongs; a Close from the server ends it with a
// *CloseError, after which the connection should be closed.
func (c *Client) ReadMessage() (op byte, p []byte, err error) {
	c.msg = c.msg[:0]
	var msgOp byte
	for {
		if err := c.fill(2); err != nil {
			return 0, nil, err
		}
		b0, b1 := c.buf[c.r], c.buf[c.r+1]
		if b0&0x70 != 0 {
			return 0, nil, errors.New("websocket: reserved bits set by the server")
		}
		if b1&0x80 != 0 {
			return 0, nil, errors.New("websocket: a masked frame from the server")
		}
		fin, fop := b0&0x80 != 0, b0&0x0f
		hl, n := 2, uint64(b1&0x7f)
		switch n {
		case 126:
			hl = 4
		case 127:
			hl = 10
		}
		if err := c.fill(hl); err != nil {
			return 0, nil, err
		}
		switch hl {
		case 4:
			n = uint64(binary.BigEndian.Uint16(c.buf[c.r+2:]))
		case 10:
			n = binary.BigEndian.Uint64(c.buf[c.r+2:])
		}
		if n > MaxPublish+1024 {
			return 0, nil, fmt.Errorf("websocket: a frame of %d bytes", n)
		}
		if err := c.fill(hl + int(n)); err != nil {
			return 0, nil, err
		}
		payload := c.buf[c.r+hl : c.r+hl+int(n)]
		c.r += hl + int(n)
		switch fop {
		case OpPing:
			c.Pings++
			if !c.NoPong {
				if err := c.write(OpPong, payload); err != nil {
					return 0, nil, err
				}
			}
			continue
		case OpPong:
			continue
		case OpClose:
			ce := &CloseError{Code: 1005}
			if len(payload) >= 2 {
				ce.Code = int(binary.BigEndian.Uint16(payload))
				ce.Reason = string(payload[2:])
			}
			return OpClose, nil, ce
		case OpText, OpBinary:
			if msgOp != 0 {
				return 0, nil, errors.New("websocket: a new message inside a fragmented one")
			}
			if fin {
				return fop, payload, nil
			}
			msgOp = fop
			c.msg = append(c.msg, payload...)
		case OpContinuation:
			if msgOp == 0 {
				return 0, nil, errors.New("websocket: a continuation with nothing to continue")
			}
			c.msg = append(c.msg, payload...)
			if fin {
				return msgOp, c.msg, nil
			}
		default:
			return 0, nil, fmt.Errorf("websocket: unknown opcode %d", fop)
		}
	}
}

// WriteText sends a text message.
func (c *Client) WriteText(s string) error { return c.write(OpText, []byte(s)) }

// WriteBinary sends a binary message.
func (c *Client) WriteBinary(p []byte) error { return c.write(OpBinary, p) }

// WriteClose sends a Close frame with code.
func (c *Client) WriteClose(code int) error {
	var p [2]byte
	binary.BigEndian.PutUint16(p[:], uint16(code))
	return c.write(OpClose, p[:])
}

// write sends one masked frame.
func (c *Client) write(op byte, p []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b := c.wbuf[:0]
	b = append(b, 0x80|op)
	switch n := len(p); {
	case n < 126:
		b = append(b, 0x80|byte(n))
	case n < 1<<16:
		b = append(b, 0x80|126, byte(n>>8), byte(n))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	// xorshift64: a fresh masking key per frame.
	c.seed ^= c.seed << 13
	c.seed ^= c.seed >> 7
	c.seed ^= c.seed << 17
	var key [4]byte
	binary.LittleEndian.PutUint32(key[:], uint32(c.seed))
	b = append(b, key[:]...)
	start := len(b)
	b = append(b, p...)
	for i := range b[start:] {
		b[start+i] ^= key[i&3]
	}
	c.wbuf = b
	_, err := c.conn.Write(b)
	if cap(c.wbuf) > 4096 {
		c.wbuf = nil // keep an idle connection small
	}
	return err
}

// Command sends "SUB topic" or "UNSUB topic" and waits for its
// acknowledgement; a message that arrives first (a publish) is an error
// unless onMessage takes it.
func (c *Client) Command(sub bool, topic string, onMessage func(op byte, p []byte) error) error {
	verb := "UNSUB "
	if sub {
		verb = "SUB "
	}
	if err := c.WriteText(verb + topic); err != nil {
		return err
	}
	want := "OK " + verb + topic
	for {
		op, p, err := c.ReadMessage()
		if err != nil {
			return err
		}
		if op == OpText && string(p) == want {
			return nil
		}
		if op == OpText && bytes.HasPrefix(p, []byte("ERR ")) {
			return fmt.Errorf("gateway: %s", p)
		}
		if onMessage == nil {
			return fmt.Errorf("gateway: %q before the acknowledgement %q", p, want)
		}
		if err := onMessage(op, p); err != nil {
			return err
		}
	}
}
