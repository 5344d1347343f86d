package runtime

import "bytes"

// The connection model's handler and its oracle (model_uring_test.go):
// what each callback checks, the checks after every step, and the settling
// at the end.

// connHandler is the model's handler: it checks what it gets and acts.
type connHandler struct{ m *connModel }

func (h connHandler) OnOpen(c *Conn) {
	m := h.m
	mc := m.conns[m.d.sock(c)-simConnFd] // its descriptor, or its slot (numbered alike)
	mc.c, mc.slot, mc.gen = c, c.slot, c.gen
	c.SetValue(mc)
}

func (h connHandler) OnData(c *Conn, data []byte) {
	m := h.m
	mc := c.Value().(*mconn)
	m.queuesExact("OnData")
	switch {
	case mc.closes > 0 || c.closed():
		m.faultf("connection %d: OnData after it closed", mc.id)
	case c.readPaused():
		m.faultf("connection %d: OnData while reading is paused", mc.id)
	case len(data) > m.l.cfg.BufferSize:
		m.faultf("connection %d: OnData got %d bytes, more than BufferSize (%d)", mc.id, len(data), m.l.cfg.BufferSize)
	case !bytes.Equal(data, mc.sent[mc.delivered:min(len(mc.sent), mc.delivered+len(data))]):
		m.faultf("connection %d: OnData got %d bytes that are not the peer's from offset %d: out of order, lost or repeated",
			mc.id, len(data), mc.delivered)
	}
	mc.delivered += len(data)
	if held(c) > 0 {
		m.seen["deferred"]++
	}
	if heldCopies(c) > 0 {
		m.seen["copied"]++
	}
	more, late, inBundle := m.r.bufs.bundlePart(data)
	if late {
		m.seen["bundle part held past its completion"]++
	}
	m.midBundle = inBundle && more
	defer func() {
		if m.midBundle && !c.closed() && !c.readPaused() && m.d.overBudget(c) {
			m.seen["budget spent mid-bundle"]++
		}
		m.midBundle = false
	}()
	// Echo, and now and then something more.
	if _, err := c.Write(data); err == nil {
		mc.written = append(mc.written, data...)
	}
	if c.Backpressured() {
		m.seen["outbound cap"]++
	}
	switch x := m.in.intn(40); {
	case x < 3:
		m.act(mc, 0, false)
	case x < 4:
		m.act(mc, 3, false)
	case x < 5:
		m.act(mc, 4, false)
	case x < 7:
		m.write(mc, 1+m.in.intn(100))
	case x < 10:
		// Another connection's reading, from this one's callback.
		if o := m.pick(m.open()); o != nil && o != mc {
			m.act(o, m.in.intn(2), true)
		}
	case x < 12:
		m.act(mc, 6, false)
	}
}

func (h connHandler) OnEOF(c *Conn) {
	m := h.m
	mc := c.Value().(*mconn)
	m.queuesExact("OnEOF")
	if mc.delivered != len(mc.sent) {
		m.faultf("connection %d: OnEOF after %d of the peer's %d bytes", mc.id, mc.delivered, len(mc.sent))
	}
	if c.readPaused() {
		m.faultf("connection %d: OnEOF while reading is paused", mc.id)
	}
	m.act(mc, 3, false)
}

func (h connHandler) OnClose(c *Conn, err error) {
	m := h.m
	mc := c.Value().(*mconn)
	m.queuesExact("OnClose")
	mc.closes++
	mc.closeErr = err
	if mc.closes > 1 {
		m.faultf("connection %d: OnClose ran %d times", mc.id, mc.closes)
	}
	if err != nil {
		mc.failed = true
	}
}

// queuesExact checks, as a callback starts, that no connection's queue
// still counts a skipped send the kernel sent whole in an earlier enter:
// the loop knows of its end once that enter returned, and a handler that
// saw those bytes as queued would refuse a TryWrite or pause for nothing.
func (m *connModel) queuesExact(where string) {
	for _, mc := range m.conns {
		if !mc.silent {
			continue
		}
		if u := &mc.c.ur; u.flags&ufSendSkip != 0 && u.skipSeq == mc.silentSeq {
			m.faultf("connection %d: %s ran while a skipped send the kernel sent whole still counts in Conn.Buffered (%d bytes queued)",
				mc.id, where, mc.c.Buffered())
		}
		mc.silent = false
	}
}

// check runs the oracle's checks between steps, while the loop waits.
func (m *connModel) check() {
	k, r, d := m.k, m.r, m.d
	k.mu.Lock()
	defer k.mu.Unlock()
	if r.exited {
		return
	}
	if n := m.l.cnt[sPanics]; n > 0 {
		m.faultf("%d callbacks panicked", n)
	}
	inCQ := 0 // buffers handed over in completions the loop has not reaped
	cqIDs := map[uint16]bool{}
	for _, e := range r.cq {
		if e.Flags&cqeBuffer != 0 {
			inCQ++
			cqIDs[uint16(e.Flags>>16)] = true
		}
	}
	if r.bufs.bun != nil {
		inCQ = r.bufs.bun.inCompletions() // a completion may hand over several (model_uring_bundle_test.go)
	}
	if r.bufs.inc != nil {
		m.checkParts(cqIDs) // parts of shared buffers (model_uring_incbuf_test.go)
	} else if n := r.bufs.count(bufLoop); n != d.waitingBufs+inCQ {
		m.faultf("the loop holds %d provided buffers, its held receives account for %d (and %d are on their way)", n, d.waitingBufs, inCQ)
	}
	m.checkPins()
	for _, op := range r.inflight {
		if op.zc && !op.notif {
			if mc := m.zcConn(op.ud); mc == nil || mc.freed {
				m.faultf("a zero-copy send in flight for a connection whose slot is free")
			}
		}
	}
	if len(r.cq) > 0 {
		return // the loop has not seen these yet: its state and the kernel's agree once it has
	}
	for _, mc := range m.conns {
		c := mc.c
		if c == nil {
			continue
		}
		inFlight := func(kind uint8) bool {
			ud := userData(kind, mc.slot, mc.gen)
			return r.find(ud) >= 0
		}
		if mc.freed {
			for _, kind := range []uint8{kindRecv, kindSend, kindCancel, kindClose, kindCloseSlot, kindShutdown, kindConnect} {
				if inFlight(kind) {
					m.faultf("connection %d: its slot is free and an operation of kind %d is in flight", mc.id, kind)
				}
			}
			continue
		}
		u := &c.ur
		switch {
		case c.closed() && held(c) > 0:
			m.faultf("connection %d is closed and holds %d receives", mc.id, held(c))
		case !c.closed() && held(c) > 0 && !c.readPaused() && !listed(c):
			m.faultf("connection %d holds receives, is not paused, and is not listed to deliver them", mc.id)
		case c.wantsInput() && c.state&stClosing == 0 && held(c) == 0 && u.flags&ufRecvEOF == 0 && !inFlight(kindRecv):
			m.faultf("connection %d reads and has no receive armed (flags %#x)", mc.id, u.flags)
		case u.flags&ufSendZC != 0 && r.find(d.zc.inFlightUD(c)) < 0:
			m.faultf("connection %d: a zero-copy send marked in flight that the kernel does not hold", mc.id)
		case !c.closed() && c.out.buffered() > 0 && !inFlight(kindSend) && u.flags&(ufSendSkip|ufSendZC) == 0:
			m.faultf("connection %d has %d bytes queued and no send in flight", mc.id, c.out.buffered())
		}
	}
}

// settle delivers what the peers sent, resumes reading everywhere, closes
// every connection and stops the loop, checking what must hold at the end.
func (m *connModel) settle() {
	// Now and then the notifications of zero-copy sends come only after
	// the loop was told to stop, which must wait for them (held from the
	// settling on, or from a step of the run: runConnModel).
	m.holdNotifs = m.holdNotifs || m.d.feats&UringZeroCopySend != 0 && m.in.chance(1, 2)
	drain := func() {
		for range 100000 {
			m.k.mu.Lock()
			progressed := m.kernelStep(true)
			m.k.mu.Unlock()
			if m.r.exited {
				return
			}
			if len(m.r.cq) > 0 {
				m.run()
				progressed = true
			}
			if !progressed {
				return
			}
		}
		m.faultf("the connections did not settle")
	}
	drain()
	for _, mc := range m.open() {
		if mc.end == 0 {
			mc.end = 1
		}
		m.l.Post(func() {
			mc.c.ResumeRead()
		})
	}
	drain()
	for _, mc := range m.open() {
		if mc.c.readPaused() {
			continue // over its outbound cap with its peer gone: closed below
		}
		if mc.delivered != len(mc.sent) && !mc.failed && mc.c.state&stClosing == 0 {
			m.faultf("connection %d: %d of the peer's %d bytes delivered once everything settled", mc.id, mc.delivered, len(mc.sent))
		}
	}
	for _, mc := range m.open() {
		m.l.Post(func() { m.act(mc, 3, true) })
	}
	drain()
	for _, mc := range m.conns {
		switch {
		case mc.c == nil:
		case mc.closes != 1:
			c := mc.c
			m.faultf("connection %d: OnClose ran %d times (state %#x, driver flags %#x, %d bytes queued, %d receives held, %d operations in the kernel)",
				mc.id, mc.closes, c.state, c.ur.flags, c.Buffered(), held(c), c.ur.ops)
		case mc.graceful && !mc.failed && !bytes.Equal(mc.received, mc.written):
			m.faultf("connection %d, closed with Close: the peer received %d of the %d bytes written",
				mc.id, len(mc.received), len(mc.written))
		case !mc.freed:
			m.faultf("connection %d: its slot was not freed", mc.id)
		}
	}
	if n := m.r.bufs.count(bufLoop); n != 0 || m.d.waitingBufs != 0 || len(m.d.deferred) != 0 {
		m.faultf("at the end the loop holds %d buffers (%d counted) and lists %d connections", n, m.d.waitingBufs, len(m.d.deferred))
	}
	if m.r.bufs.inc != nil {
		m.settleParts()
	}
	if !m.d.discardBuffers() {
		m.faultf("at the end the buffers' pages cannot be given back")
	}
	// A graceful stop waits for every notification; a forced one (Close,
	// or Shutdown past its context) does not, and abandons the buffers
	// of the sends whose notifications have not come (uring_zc.go).
	forced := !m.holdNotifs || m.in.chance(1, 2)
	if forced {
		m.l.Post(func() { m.l.forceStop(ErrShutdown) })
	} else {
		m.l.Post(m.l.beginShutdown)
	}
	drain()
	abandoned := false
	if m.holdNotifs {
		switch {
		case forced && len(m.pins) > 0:
			if !m.r.exited {
				m.faultf("a forced stop waits for %d zero-copy notifications", len(m.pins))
			}
			m.checkZCAbandoned()
			m.seen["forced stop abandons notifications"]++
			abandoned = true
		case m.r.exited:
			m.checkZCEnd() // none may be held back now
		default:
			m.seen["stopped with notifications to come"] += len(m.pins)
		}
		m.holdNotifs = false
		drain()
	}
	if !m.r.exited {
		m.faultf("the loop did not exit once stopped")
	}
	if !abandoned {
		m.checkZCEnd()
	}
}
