package runtime

import (
	"bytes"

	"golang.org/x/sys/unix"
)

// The stand-in kernel's side of the connection model (model_uring_test.go):
// checking the entries submitted, running the sends that never wait, and
// completing receives, sends and cancels in flight.

const (
	cqeBuffer = 1 << 0
	cqeMore   = 1 << 1
)

// kernelStep completes one operation in flight, chosen at random (all, to
// settle, completes sends whole and fails nothing); it reports whether
// there was one to complete.
func (m *connModel) kernelStep(settling bool) bool {
	r, in := m.r, m.in
	var can []int
	for i, op := range r.inflight {
		if m.ready(op) {
			can = append(can, i)
		}
	}
	if len(can) == 0 {
		return false
	}
	i := can[in.intn(len(can))]
	if m.focus != nil && in.chance(3, 4) {
		for _, j := range can {
			if m.byUserData(r.inflight[j].ud) == m.focus {
				i = j
				break
			}
		}
	}
	op := r.inflight[i]
	mc := m.byUserData(op.ud)
	switch op.kind {
	case kindRecv:
		m.receive(i, op, mc, settling)
	case kindSend:
		r.take(i)
		n := len(op.p)
		switch {
		case !settling && in.chance(1, 40):
			r.post(op.ud, -int32(unix.EPIPE), 0)
			m.log("send of connection %d fails", mc.id)
			mc.failed = true
			return true
		case !settling && n > 1 && in.chance(1, 2):
			n = 1 + in.intn(n-1)
			m.seen["partial send"]++
		}
		mc.received = append(mc.received, op.p[:n]...)
		if !bytes.HasPrefix(mc.written, mc.received) {
			m.k.fault("connection %d: the peer received bytes the handler did not write in that order (at %d)",
				mc.id, len(mc.received)-n)
		}
		r.post(op.ud, int32(n), 0)
		m.log("send of connection %d completes %d of %d", mc.id, n, len(op.p))
	case kindSendZC:
		r.take(i)
		m.zcStep(op, settling) // model_uring_zc_test.go
	case kindCancel:
		if j := r.find(op.target); j >= 0 && r.inflight[j].kind == kindRecv && m.ready(r.inflight[j]) && in.chance(1, 2) {
			// The data it cancels arrives first.
			m.receive(j, r.inflight[j], m.byUserData(op.target), settling)
			m.seen["cancel after data"]++
			return true
		}
		r.completeCancel(i)
		m.log("cancel for connection %v runs", mc != nil)
	case kindClose, kindCloseSlot:
		r.take(i)
		m.k.closedFds[op.fd] = true // a slot is numbered as its descriptor would be (direct)
		r.post(op.ud, 0, 0)
		if op.kind == kindCloseSlot {
			m.seen["slot closed"]++
		}
		m.log("close of descriptor or slot %d", op.fd)
	case kindShutdown:
		// Issued by an io-wq worker, a step after its submit: here its
		// slot is resolved (submitted checks that no close of it came
		// first).
		r.take(i)
		r.post(op.ud, 0, 0)
		if op.fixed {
			m.seen["slot shut down"]++
		}
		m.log("shutdown of descriptor or slot %d", op.fd)
	case kindAcceptCancel:
		r.completeCancel(i)
	default:
		r.take(i)
		r.post(op.ud, 0, 0)
	}
	return true
}

// ready reports whether op can complete now: a receive only with data, or
// the end of the stream, to report.
func (m *connModel) ready(op *simOp) bool {
	switch op.kind {
	case kindAccept:
		return false
	case kindSendZC:
		return !op.notif || !m.holdNotifs
	case kindRecv:
		mc := m.byUserData(op.ud)
		return mc != nil && (mc.given < len(mc.sent) || mc.end != 0 && !mc.endGiven)
	}
	return true
}

// receive completes receive op (at index i) of mc with what the peer sent.
func (m *connModel) receive(i int, op *simOp, mc *mconn, settling bool) {
	r, in := m.r, m.in
	if mc.given == len(mc.sent) {
		r.take(i)
		mc.endGiven = true
		if mc.end == 2 {
			r.post(op.ud, -int32(unix.ECONNRESET), 0)
			m.seen["reset"]++
		} else {
			r.post(op.ud, 0, 0)
			m.seen["end of stream"]++
		}
		m.log("receive of connection %d: the end (%d)", mc.id, mc.end)
		return
	}
	n := min(len(mc.sent)-mc.given, r.bufs.Size())
	if op.bundle {
		// Up to four buffers' worth, as much as the socket holds.
		n = min(len(mc.sent)-mc.given, r.bufs.Size()*(1+in.intn(4)))
	}
	if !settling && n > 1 && in.chance(1, 3) {
		n = 1 + in.intn(n-1) // short
	}
	var id uint16
	var ok, bufMore bool
	if r.bufs.inc != nil {
		var shared bool
		id, n, bufMore, shared, ok = r.bufs.fillPart(mc.sent[mc.given:mc.given+n], mc.id)
		if shared {
			m.seen["incremental shared buffer"]++
		}
		if n > m.l.cfg.BufferSize {
			m.seen["incremental receive past BufferSize"]++
		}
	} else if r.bufs.bun != nil {
		want := n
		id, n, ok = r.bufs.fillBundle(mc.sent[mc.given:mc.given+n], op.bundle)
		if n > r.bufs.Size() {
			m.seen["bundle of several buffers"]++
		}
		if ok && n < want {
			m.seen["bundle short of buffers"]++
		}
		if ok && !op.bundle {
			m.seen["single receive with bundles"]++ // the throttled single receive
		}
	} else {
		id, ok = r.bufs.fill(mc.sent[mc.given : mc.given+n])
	}
	if !ok {
		r.take(i)
		r.post(op.ud, -int32(unix.ENOBUFS), 0)
		m.seen["ENOBUFS"]++
		m.log("receive of connection %d: out of buffers", mc.id)
		return
	}
	mc.given += n
	flags := uint32(id)<<16 | cqeBuffer
	if bufMore {
		flags |= cqeBufMore
	}
	if op.multi && (settling || !in.chance(1, 8)) {
		flags |= cqeMore
	} else {
		r.take(i)
		if op.multi {
			m.seen["multishot ended"]++
		}
	}
	r.post(op.ud, int32(n), flags)
	m.log("receive of connection %d: %d bytes in buffer %d (more %v)", mc.id, n, id, flags&cqeMore != 0)
}

// submitted sees each entry the loop hands the kernel (under k.mu): a
// close's descriptor is gone once it completes, and nothing may be
// submitted for a connection whose slot was freed.
func (m *connModel) submitted(r *simRing, op *simOp) bool {
	if op.kind == kindSendZC {
		m.zcSubmitted(op)
		return false
	}
	if op.kind <= kindConnect && op.kind >= kindRecv || op.kind == kindCloseSlot {
		if mc := m.byUserData(op.ud); mc != nil && mc.freed {
			m.k.fault("an entry of kind %d for connection %d after its slot was freed", op.kind, mc.id)
		}
	}
	switch {
	case !m.direct:
		if op.fixed || op.kind == kindCloseSlot {
			m.k.fault("an entry of kind %d on a slot without direct descriptors", op.kind)
		}
	case op.kind == kindRecv || op.kind == kindSend || op.kind == kindShutdown:
		if !op.fixed {
			m.k.fault("an entry of kind %d of a connection on a slot names a descriptor", op.kind)
		}
	case op.kind == kindClose && op.fd <= simInstalledFd:
		m.k.fault("the close of descriptor %d: the connections are slots (or installed descriptors)", op.fd)
	case op.kind == kindClose:
		// A connection's installed descriptor is its own slot's.
		if mc := m.byUserData(op.ud); mc != nil && m.installedFrom[op.fd] != mc.fd {
			m.k.fault("connection %d closes descriptor %d, installed of slot %d, not of its own %d",
				mc.id, op.fd, m.installedFrom[op.fd], mc.fd)
		}
	case op.kind == kindCloseSlot:
		// The kernel closes a slot inline, at submit, but runs a
		// shutdown on its io-wq workers (io_shutdown_prep forces it
		// async), which resolve the slot only when they issue it: at a
		// later step (kernelStep). A slot closed under a shutdown in
		// flight may by then hold the next connection accepted into it.
		for _, o := range r.inflight {
			if o.kind == kindShutdown && o.fixed && o.fd == op.fd {
				m.k.fault("the close of slot %d submitted while a shutdown on it is in flight: the shutdown may reach the next connection on the slot", op.fd)
			}
		}
	}
	if op.kind == kindSend && op.nowait {
		m.sendNoWait(r, op)
		return true
	}
	if op.kind == kindInstall {
		// Inline, as the kernel runs it: a descriptor for the slot (a
		// connection's error names its addresses).
		m.installs++
		m.installedFrom[simInstalledFd+m.installs] = op.fd
		r.post(op.ud, int32(simInstalledFd+m.installs), 0)
		m.seen["descriptor installed"]++
		return true
	}
	return false
}

// sendNoWait runs a send that never waits as the kernel does, within the
// enter that submits it (under k.mu): all of it (posting nothing when its
// success is skipped), part of it (the short count: MSG_WAITALL makes it
// a failure, which is posted), none (-EAGAIN: the socket is full), or a
// failure of the connection.
func (m *connModel) sendNoWait(r *simRing, op *simOp) {
	in, mc := m.in, m.byUserData(op.ud)
	if mc == nil {
		r.post(op.ud, -int32(unix.EBADF), 0)
		return
	}
	n := len(op.p)
	switch x := in.intn(40); {
	case x == 0:
		r.post(op.ud, -int32(unix.EPIPE), 0)
		m.log("skipped send of connection %d fails", mc.id)
		mc.failed = true
		return
	case x < 8:
		r.post(op.ud, -int32(unix.EAGAIN), 0)
		m.log("skipped send of connection %d finds the socket full", mc.id)
		m.seen["skipped send EAGAIN"]++
		return
	case x < 16 && n > 1:
		n = 1 + in.intn(n-1)
		m.seen["skipped send short"]++
	default:
		m.seen["skipped send"]++
	}
	mc.received = append(mc.received, op.p[:n]...)
	if !bytes.HasPrefix(mc.written, mc.received) {
		m.k.fault("connection %d: the peer received bytes the handler did not write in that order (at %d)",
			mc.id, len(mc.received)-n)
	}
	if n < len(op.p) || !op.skip {
		r.post(op.ud, int32(n), 0)
	} else {
		// The loop's thread is in this enter: its state is read here.
		mc.silent, mc.silentSeq = true, mc.c.ur.skipSeq
	}
	m.log("skipped send of connection %d sends %d of %d", mc.id, n, len(op.p))
}
