package runtime

import (
	"bytes"

	"golang.org/x/sys/unix"
)

// The stand-in kernel's side of the connection model (model_uring_test.go):
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
	if !settling && n > 1 && in.chance(1, 3) {
		n = 1 + in.intn(n-1) // short
	}
	id, ok := r.bufs.fill(mc.sent[mc.given : mc.given+n])
	if !ok {
		r.take(i)
		r.post(op.ud, -int32(unix.ENOBUFS), 0)
		m.seen["ENOBUFS"]++
		m.log("receive of connection %d: out of buffers", mc.id)
		return
	}
	mc.given += n
	flags := uint32(id)<<16 | cqeBuffer
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
