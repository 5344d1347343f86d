//go:build linux

package runtime

import (
	"errors"
	"io"
	"net"
	"unsafe"
)

// A TLS connection's bytes on the loop: what the peer sent is decrypted
// before OnData sees it, what the handler writes is encrypted straight into
// the outbound queue (one copy, crypto/tls's), and the outbound queue is
// reported in plaintext (Buffered, and so the outbound cap).

// tlsReceived takes ciphertext the peer sent on c.
func (l *Loop) tlsReceived(c *Conn, data []byte) {
	t := c.tlsState()
	if t.est {
		plain, err := t.s.Decrypt(l.takePlain(), data, 0)
		l.tlsHandle(c, plain, err)
		return
	}
	if t.ended {
		return // failed: closing
	}
	plain, err := t.s.Decrypt(l.takePlain(), data, 0)
	done, herr := t.s.HandshakeDone()
	if !done {
		l.tls.plain = plain[:0]
		if t.s.Buffered() > tlsMaxEarly && !t.paused && c.state&stPauseRead == 0 {
			t.paused = true
			c.PauseRead()
		}
		return
	}
	// The handshake ended just now: Decrypt either kept data for it or,
	// past its end, decrypted what followed it.
	if !l.tlsEnded(c, herr) || c.closed() {
		l.tls.plain = plain[:0]
		return
	}
	if err == nil {
		plain, err = t.s.Decrypt(plain, nil, 0)
	}
	l.tlsHandle(c, plain, err)
}

// tlsDeliver decrypts what c's session holds (what arrived during the
// handshake) and hands it over.
func (l *Loop) tlsDeliver(c *Conn, data []byte) {
	plain, err := c.tlsState().s.Decrypt(l.takePlain(), data, 0)
	l.tlsHandle(c, plain, err)
}

// takePlain lends the loop's plaintext buffer out (a handler callback may
// not make another loop's Decrypt run, but taking it makes sure).
func (l *Loop) takePlain() []byte {
	b := l.tls.plain
	l.tls.plain = nil
	return b[:0]
}

// tlsHandle sends what decrypting wrote (a KeyUpdate's answer, an alert),
// hands the plaintext to the handler and then handles how the read ended:
// the peer's close_notify is the end of its stream, a TLS error (the alert
// is sent first) closes c with it.
func (l *Loop) tlsHandle(c *Conn, plain []byte, err error) {
	l.tlsFlush(c)
	if len(plain) > 0 && c.state&(stClosing|stClosed|stEOF) == 0 {
		l.callOnData(c, plain)
	}
	if cap(plain) <= 4*l.cfg.BufferSize+64<<10 {
		l.tls.plain = plain[:0]
	}
	switch {
	case err == nil || c.closed():
	case err == io.EOF:
		l.peerEOF(c)
	default:
		l.log.Debug("percore: tls error", "loop", l.id, "remote", addrString(c.RemoteAddr()), "err", err)
		c.tlsState().err = c.opError("read", err)
		c.Close() // once the alert is sent
	}
}

// tlsFlush queues what c's session wrote unasked: handshake flights,
// alerts, a KeyUpdate's answer.
func (l *Loop) tlsFlush(c *Conn) {
	t := c.tlsState()
	if !t.s.Pending() {
		return
	}
	b := t.s.Output(l.tls.wire[:0])
	if c.writable() {
		if c.out.buffered() == 0 {
			c.progress = l.stamp()
		}
		l.d.write(c, b)
		t.out.add(c.out.buffered(), len(b), len(b))
		if c.out.buffered() > 0 {
			l.queued(c)
		}
	}
	l.tls.wire = b[:0]
}

// tlsShut queues the close_notify alert, once (Close, CloseLinger,
// CloseWrite).
func (c *Conn) tlsShut() {
	l := c.loop
	b := c.tlsState().s.CloseNotify(l.tls.wire[:0])
	if len(b) > 0 {
		if c.out.buffered() == 0 {
			c.progress = l.stamp()
		}
		l.d.write(c, b)
		c.tlsState().out.add(c.out.buffered(), len(b), len(b))
		if c.out.buffered() > 0 {
			l.queued(c)
		}
	}
	l.tls.wire = b[:0]
}

// tlsSealHeadroom is room for the records' headers and tags around n
// plaintext bytes: crypto/tls's records carry at least about 1,100 bytes
// (its smallest dynamic size), and at most 29 bytes more each (TLS 1.2's
// AES-GCM: header, explicit nonce, tag; TLS 1.3's is 22).
func tlsSealHeadroom(n int) int { return (n/1024+1)*32 + 64 }

// tlsSeal encrypts p into c's outbound queue. The records go straight
// into the queue's buffer when they fit the room reserved for them.
func (c *Conn) tlsSeal(p []byte) error {
	l, t := c.loop, c.tlsState()
	if c.out.buffered() == 0 {
		c.progress = l.stamp()
	}
	q := c.outw()
	room := q.reserve(l, len(p)+tlsSealHeadroom(len(p)))
	ct, err := t.s.Encrypt(room[:0], p)
	if err != nil {
		q.reserved = 0
		c.putOut()
		l.fail(c, "write", err)
		return c.opError("write", err)
	}
	if len(ct) <= len(room) && unsafe.SliceData(ct) == unsafe.SliceData(room) {
		q.commit(len(ct))
		l.d.committed(c)
	} else { // a pending flight made it longer than reserved
		q.reserved = 0
		l.d.write(c, ct)
		c.putOut() // written straight to the socket (epoll)
	}
	t.out.add(c.out.buffered(), len(ct), len(ct)-len(p))
	if c.out.buffered() > 0 {
		l.queued(c)
	}
	return nil
}

// tlsWrite is Write on a TLS connection.
func (c *Conn) tlsWrite(p []byte) (int, error) {
	if !c.writable() {
		return 0, c.opError("write", net.ErrClosed)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if err := c.tlsSeal(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// tlsWritev is Writev on a TLS connection: the buffers are gathered into
// one so that they share records.
func (c *Conn) tlsWritev(bufs [][]byte) (int, error) {
	if !c.writable() {
		return 0, c.opError("write", net.ErrClosed)
	}
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	if n == 0 {
		return 0, nil
	}
	l := c.loop
	g := l.getBuf(n)[:0]
	for _, b := range bufs {
		g = append(g, b...)
	}
	err := c.tlsSeal(g)
	l.putBuf(g)
	if err != nil {
		return 0, err
	}
	return n, nil
}

// tlsReserve is Reserve on a TLS connection: room for plaintext, which
// Commit encrypts into the queue.
func (c *Conn) tlsReserve(n int) []byte {
	if !c.writable() || n <= 0 {
		return nil
	}
	t := c.tlsState()
	if cap(t.res) < n {
		c.loop.putBuf(t.res)
		t.res = c.loop.getBuf(n)
	}
	t.resN = n
	return t.res[:n]
}

// tlsCommit is Commit on a TLS connection.
func (c *Conn) tlsCommit(n int) error {
	if !c.writable() {
		return c.opError("write", net.ErrClosed)
	}
	t := c.tlsState()
	if n > t.resN {
		return c.opError("write", errors.New("commit of more bytes than reserved"))
	}
	t.resN = 0
	var err error
	if n > 0 {
		err = c.tlsSeal(t.res[:n])
	}
	c.loop.putBuf(t.res) // an idle connection holds none
	t.res = nil
	return err
}

// outPlain follows the TLS bytes of the outbound queue that are not the
// handler's (record headers and tags, handshake flights, alerts), so that
// Buffered, and the outbound cap with it, count plaintext. marks[i] says
// that once wire bytes up to end are sent, so are over bytes of overhead;
// when there are too many, every other one is dropped. The count errs
// only low, by the overhead among the bytes of the marks not yet passed
// (a write's records, or a few writes' after a merge).
type outPlain struct {
	wire, over uint64 // ever queued: all bytes, overhead bytes
	sentOver   uint64 // overhead known sent
	marks      []plainMark
	head       int
}

type plainMark struct{ end, over uint64 }

const maxPlainMarks = 64

// add records n bytes just queued, over of them overhead, with raw bytes
// now queued in all.
func (o *outPlain) add(raw, n, over int) {
	o.wire += uint64(n)
	o.over += uint64(over)
	if raw == 0 { // all sent (epoll's direct write)
		o.sentOver = o.over
		o.marks, o.head = o.marks[:0], 0
		return
	}
	if len(o.marks)-o.head >= maxPlainMarks {
		live := o.marks[o.head:]
		k := 0
		for i := 1; i < len(live); i += 2 {
			live[k] = live[i]
			k++
		}
		o.marks = append(o.marks[:0], live[:k]...)
		o.head = 0
	}
	o.marks = append(o.marks, plainMark{end: o.wire, over: o.over})
}

// buffered returns the plaintext bytes among raw queued ones; at least 1
// while any byte is queued.
func (o *outPlain) buffered(raw int) int {
	if raw == 0 {
		o.sentOver = o.over
		o.marks, o.head = o.marks[:0], 0
		return 0
	}
	sent := o.wire - uint64(raw)
	for o.head < len(o.marks) && o.marks[o.head].end <= sent {
		o.sentOver = o.marks[o.head].over
		o.head++
	}
	if o.head == len(o.marks) {
		o.marks, o.head = o.marks[:0], 0
	}
	return max(raw-int(o.over-o.sentOver), 1)
}

func (o *outPlain) reset() { *o = outPlain{} }

// tlsBuffered is Buffered on a TLS connection.
func (c *Conn) tlsBuffered() int { return c.tlsState().out.buffered(c.out.buffered()) }
