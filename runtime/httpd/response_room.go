//go:build linux

package httpd

import (
	"slices"
)

// startRoom is the room a response reserves first: a head and a small
// body fit, so that most responses reserve once.
const startRoom = 1024

// viewRoom is the room the first answer of a read reserves: a pipelined
// read's answers (16 small ones) fit without moving it.
const viewRoom = 4096

// grow makes room for n more bytes in buf: in the connection's queue
// during a handler's call, in the spill buffer outside one. It returns
// false when the connection can no longer be written to.
func (w *Response) grow(n int) bool {
	if cap(w.buf)-len(w.buf) >= n {
		return true
	}
	cn := w.cn
	if w.Gone() {
		return false
	}
	ls := cn.ls
	if !cn.active {
		if w.inPlace {
			panic("httpd: a Response's reserved room outlived its handler's call")
		}
		if w.spill == nil {
			w.spill = ls.getBuf()
		}
		if w.buf == nil {
			w.buf = w.spill[:0]
		}
		w.buf = slices.Grow(w.buf, n)
		w.spill = w.buf
		return true
	}
	size := max(len(w.buf)+n, 2*cap(w.buf), 512)
	if len(w.buf) == 0 {
		if cn.inView {
			// The first answer of a read: room for the others it may
			// hold too (they are kept after it), so that the room
			// seldom moves.
			size = max(size, viewRoom)
		}
		r := cn.c.Reserve(size)
		if r == nil {
			return false
		}
		w.buf, w.inPlace = r[:0:len(r)], true // Commit takes no more than was reserved
		return true
	}
	// The room moves (the queue's buffer grows): keep what is written.
	ls.scratch = append(ls.scratch[:0], w.buf...)
	r := cn.c.Reserve(size)
	if r == nil {
		return false
	}
	w.buf = append(r[:0:len(r)], ls.scratch...)
	w.inPlace = true
	return true
}

// send hands what buf holds to the connection (the answers kept before
// it too).
func (w *Response) send() {
	c := w.cn.c
	if w.inPlace {
		n, k := len(w.buf), w.kept
		w.buf, w.inPlace, w.kept = nil, false, 0
		w.cn.ls.commits++
		if c.Commit(n) == nil && n > k {
			w.committed = true
		}
		return
	}
	if len(w.buf) > 0 {
		if _, err := c.Write(w.buf); err == nil {
			w.committed = true
		}
		w.spill = w.buf[:0]
	}
	w.buf = nil
}

// keep ends a response written in place during OnView without committing
// it: the next response of the read appends after it, and commitKept
// hands them all over at once. It reports false when the response must be
// sent now (outside OnView, or too big to keep).
func (w *Response) keep() bool {
	if !w.inPlace || !w.cn.inView || len(w.buf) > bufferedBody {
		return false
	}
	if len(w.buf) > w.kept {
		w.committed = true
	}
	w.kept = len(w.buf)
	return true
}

// commitKept hands the kept answers to the connection. Bytes of the
// response in progress after them (a handler asked for Conn) move to new
// room.
func (w *Response) commitKept() {
	k := w.kept
	if k == 0 {
		return
	}
	cn := w.cn
	c := cn.c
	w.kept = 0
	cn.ls.commits++
	if len(w.buf) == k {
		w.buf, w.inPlace = nil, false
		c.Commit(k)
		return
	}
	ls := cn.ls
	ls.scratch = append(ls.scratch[:0], w.buf[k:]...)
	room := cap(w.buf) - k
	c.Commit(k)
	if w.bodyAt > 0 {
		w.bodyAt -= k
	}
	w.buf, w.inPlace = nil, false
	if r := c.Reserve(max(room, len(ls.scratch), 512)); r != nil {
		w.buf, w.inPlace = append(r[:0:len(r)], ls.scratch...), true
	}
}

// drop forgets what was written and not sent (an error answer replaces
// it).
func (w *Response) drop() {
	if w.inPlace {
		if w.kept > 0 {
			w.cn.ls.commits++
		}
		w.cn.c.Commit(w.kept) // the answers before it go out
	}
	w.buf, w.inPlace, w.kept = nil, false, 0
	w.bodyAt = 0
	w.ended = true
}
