//go:build linux

package runtime

import (
	"context"
	"errors"
	"net"
	"os"

	"github.com/percore/percore/internal/sys"
)

// A restart that reconnects no one (docs/decisions/0054, 0055): the old
// process hands every established connection that is between requests to
// the new one, descriptor and handler state, over the channel of
// handoff_wire.go; the new one adopts them (adopt.go). What cannot go is
// closed the protocol's way, as a graceful Shutdown closes it.

// HandoverHandler is implemented by handlers whose connections may move to
// a new process at a restart (Runtime.HandOver). The runtime asks only
// about a connection with nothing queued to send, no file send and no
// request in flight (BeginRequest), accepted from a listener, on the
// connection's loop; only the protocol knows whether it is between
// requests, so it answers:
//
//   - state, nil: hand c over now. state (at most MaxHandoverState bytes,
//     copied: the handler may reuse it) is given back to the new process's
//     OnAdopt (a WebSocket gateway's subscriptions, a RESP connection's
//     selected database; nil for HTTP). After it, c reads and writes
//     nothing more here: its OnClose follows with ErrHandedOver once the
//     new process has it, or, should the new process not take it, c is
//     closed the protocol's way (OnShutdown, then a close once idle).
//   - ErrHandoverLater: c is not between requests (a partial request is
//     held, an answer is being made): ask again once the runtime sees it
//     idle again (after its next OnData, a drained queue, an EndRequest),
//     until the shutdown's deadline.
//   - ErrHandoverDeclined, or any other error: never hand c over; it is
//     closed the protocol's way (OnShutdown, then a close once idle).
//
// A handler without OnHandover has every connection declined: the runtime
// cannot know where its requests end.
type HandoverHandler interface {
	OnHandover(c *Conn) (state []byte, err error)
}

// AdoptHandler is implemented by handlers that want to know that a
// connection was handed over by the process this one replaced
// (Runtime.Adopt), with the state that process's OnHandover attached
// (valid only during the call, as OnData's data). OnAdopt is called
// instead of OnOpen; a handler without it gets OnOpen, as for a
// connection just accepted (the state is then dropped: a handler that
// attaches state implements OnAdopt). Input the peer sent meanwhile
// waited in the kernel and arrives as OnData after it.
type AdoptHandler interface {
	OnAdopt(c *Conn, state []byte)
}

var (
	// ErrHandoverLater is what OnHandover returns for a connection that is
	// not between requests yet.
	ErrHandoverLater = errors.New("percore: connection not between requests: hand it over later")
	// ErrHandoverDeclined is what OnHandover returns for a connection that
	// must not move to a new process.
	ErrHandoverDeclined = errors.New("percore: connection declines the hand-over")
	// ErrHandoverRunning is HandOver's error while a hand-over runs.
	ErrHandoverRunning = errors.New("percore: a hand-over to a new process is already under way")
	// ErrHandedOver: the connection went to a new process (OnClose gets it,
	// wrapped in a *net.OpError). It matches net.ErrClosed.
	ErrHandedOver error = &closeReason{"handed over to a new process", net.ErrClosed}
)

// DeclineHandover marks c as one that a restart never hands to a new
// process, whatever its handler answers: a connection with state in user
// space that cannot cross (a TLS session's keys and sequence numbers)
// sets it when it opens. It is closed the protocol's way instead.
func (c *Conn) DeclineHandover() { c.state |= stDeclineHandoff }

// HandOver shuts the runtime down as Shutdown does, except that every
// established connection (TCP or Unix stream, accepted from a listener)
// that is between requests goes to the process at the other end of to
// (HandoverSockets; that process calls Adopt) instead of being closed:
// those idle now at once, each other one as soon as its handler says it
// is between requests (HandoverHandler), until ctx is done. Bytes its peer
// sends meanwhile wait in the kernel and are read by the new process: the
// peer sees no close. A connection whose handler declines, or that cannot
// go (DeclineHandover, a dial, a file send), gets the protocol's goodbye
// (OnShutdown) and is closed once idle, as Shutdown closes it. Call it
// once the new process serves (its listeners came from ListenerFiles). It
// returns when every loop has stopped, and ctx's error if its deadline
// came first (the rest is then closed as Close does). Should the new
// process die or stop taking connections, HandOver logs it and serves
// what it still holds until each closes the protocol's way. A second
// HandOver while one runs returns ErrHandoverRunning. to may be closed
// once HandOver returns.
func (rt *Runtime) HandOver(ctx context.Context, to *os.File) error {
	uc, err := handoffConn(to)
	if err != nil {
		return err
	}
	out := newHandoffOut(rt, uc, ctx)
	if !rt.handoff.CompareAndSwap(nil, out) {
		uc.Close()
		rt.cfg.Logger.Warn("percore: hand-over refused: one is already under way")
		return ErrHandoverRunning
	}
	go out.run()
	err = rt.shutdown(ctx, func(l *Loop) { l.ho = &loopHandoff{out: out} })
	out.stop()
	st := rt.Stats()
	rt.cfg.Logger.Info("percore: hand-over done", "handed", st.HandedOff,
		"declined", st.HandoffDeclined, "failed", st.HandoffFailed)
	return err
}

// loopHandoff is one loop's part of a hand-over.
type loopHandoff struct {
	out *handoffOut
	// pending have their reading paused, and wait for the driver to let
	// go of their input; ready may go in the next batch; inFlight says
	// that this loop's batch is with the sender.
	pending  []handoffEntry
	ready    []handoffEntry
	inFlight bool
	pumping  bool // the pump's timer is set
}

// handoffEntry is one connection on its way: the loop's, until the sender
// has its duplicate descriptor (fd), listener name and state.
type handoffEntry struct {
	c     *Conn
	fd    int
	ln    string
	state []byte
	taken bool // set by the sender: the new process has it
}

// offerHandoff is a graceful shutdown's hook (sweep, closeIfIdle) while a
// hand-over runs: it reports true when c goes to the new process or may
// still (the caller leaves it alone), false when it is closed the
// protocol's way: its OnShutdown has run then, once.
func (l *Loop) offerHandoff(c *Conn) bool {
	if c.state&stHandoff != 0 {
		return true
	}
	if c.state&stNoHandoff == 0 && !c.closed() {
		switch l.tryHandoff(c) {
		case handoffTaken, handoffWait:
			return true
		}
	}
	if c.state&stHandoffBye == 0 && !c.closed() {
		c.state |= stHandoffBye
		l.callOnShutdown(c)
	}
	return c.closed()
}

type handoffAnswer int

const (
	handoffTaken handoffAnswer = iota // on its way
	handoffWait                       // not between requests: ask again at its next idle point
	handoffNo                         // declined (stNoHandoff set, counted)
)

// tryHandoff asks whether c can go now, and starts it on its way if so.
func (l *Loop) tryHandoff(c *Conn) handoffAnswer {
	ho := l.ho
	const never = stClosing | stEOF | stConnecting | stCloseWriteAsked | stWriteClosed | stLinger | stPauseRead | stDeclineHandoff
	switch {
	case c.state&stOpen == 0 || c.state&never != 0 || c.ln == nil || c.tlsState() != nil:
		// A TLS session's keys and sequence numbers live in this process
		// (kernel TLS is not used): it cannot cross.
		return l.declineHandoff(c, sHandoffDeclined)
	case ho.out.failed():
		return l.declineHandoff(c, sHandoffFailed)
	case !c.idleOut() || c.inFlight() > 0 || c.state&stPaused != 0:
		return handoffWait
	}
	hh, ok := c.h.(HandoverHandler)
	if !ok {
		return l.declineHandoff(c, sHandoffDeclined)
	}
	state, err := l.callOnHandover(hh, c)
	switch {
	case c.closed():
		return handoffWait // the handler closed it: nothing left to decide
	case errors.Is(err, ErrHandoverLater):
		return handoffWait
	case err != nil:
		return l.declineHandoff(c, sHandoffDeclined)
	case len(state) > MaxHandoverState:
		l.log.Warn("percore: hand-over state over MaxHandoverState; closing the connection the protocol's way instead",
			"loop", l.id, "bytes", len(state), "max", MaxHandoverState)
		return l.declineHandoff(c, sHandoffDeclined)
	case !c.idleOut() || c.inFlight() > 0:
		return handoffWait // it wrote or began a request after all
	}
	c.state |= stHandoff
	l.d.pauseRead(c)
	ho.pending = append(ho.pending, handoffEntry{c: c, fd: -1, state: append([]byte(nil), state...)})
	l.pumpHandoff()
	return handoffTaken
}

// declineHandoff marks c as staying here, counted under stat.
func (l *Loop) declineHandoff(c *Conn, stat stat) handoffAnswer {
	c.state |= stNoHandoff
	l.cnt[stat]++
	return handoffNo
}

// callOnHandover runs c's handler's OnHandover.
func (l *Loop) callOnHandover(hh HandoverHandler, c *Conn) ([]byte, error) {
	l.depth++
	defer l.endCall(c)
	return hh.OnHandover(c)
}

// pumpHandoff sets the pump to run next turn, once.
func (l *Loop) pumpHandoff() {
	if ho := l.ho; !ho.pumping {
		ho.pumping = true
		l.AfterFunc(0, l.handoffPump)
	}
}

// handoffPump moves the connections whose input is all in the kernel to
// the ready list, gives back to the handler those whose input reached
// user space first (it is delivered, and they are offered again when next
// idle), and hands the sender a batch.
func (l *Loop) handoffPump() {
	ho := l.ho
	ho.pumping = false
	keep := ho.pending[:0]
	for _, e := range ho.pending {
		c := e.c
		if c.closed() || c.state&stHandoff == 0 {
			continue
		}
		armed, waiting := l.d.inputHeld(c)
		switch {
		case waiting:
			c.state &^= stHandoff
			l.d.resumeRead(c)
		case armed:
			keep = append(keep, e)
		default:
			ho.ready = append(ho.ready, e)
		}
	}
	clear(ho.pending[len(keep):])
	ho.pending = keep
	l.shipHandoff()
	if len(ho.pending) > 0 {
		l.pumpHandoff()
	}
}

// shipHandoff gives the sender the next batch of ready connections, each
// with a duplicate of its descriptor (the loop's own stays open until the
// new process has it), unless this loop's last batch is still there.
func (l *Loop) shipHandoff() {
	ho := l.ho
	if ho.inFlight || len(ho.ready) == 0 {
		return
	}
	n := min(len(ho.ready), handoffBatch)
	batch := make([]handoffEntry, 0, n)
	for _, e := range ho.ready[:n] {
		c := e.c
		if c.closed() || c.state&stHandoff == 0 {
			continue
		}
		fd, err := l.d.descriptor(c) // made once for a direct descriptor (uring_fixed.go)
		if err == nil {
			fd, err = sys.DupCloexec(fd)
		}
		if err != nil {
			l.log.Warn("percore: hand-over: duplicate descriptor", "loop", l.id, "err", err)
			l.keepHandoff(c)
			continue
		}
		e.fd, e.ln = fd, c.ln.String()
		batch = append(batch, e)
	}
	// Taken from the front; the array is reused once empty (a copy of
	// the rest per batch would cost the whole list each time).
	clear(ho.ready[:n])
	ho.ready = ho.ready[n:]
	if len(ho.ready) == 0 {
		ho.ready = ho.ready[:0:0]
	}
	if len(batch) == 0 {
		l.shipHandoff()
		return
	}
	ho.inFlight = true
	if !ho.out.submit(l, batch) {
		ho.inFlight = false
		for _, e := range batch {
			_ = sys.Close(e.fd)
			l.keepHandoff(e.c)
		}
	}
}

// handoffDone is the sender's report on a batch, on the loop: the
// connections the new process took are closed here (OnClose with
// ErrHandedOver), the others stay and close the protocol's way.
func (l *Loop) handoffDone(batch []handoffEntry) {
	ho := l.ho
	ho.inFlight = false
	// The next batch goes first: the new process adopts it while this
	// loop closes its copies of the last one.
	l.shipHandoff()
	for _, e := range batch {
		c := e.c
		if c.closed() {
			continue // closed here meanwhile (a timer, a forced stop)
		}
		if e.taken {
			l.cnt[sHandedOff]++
			l.closeConn(c, c.opError("close", ErrHandedOver))
			continue
		}
		l.keepHandoff(c)
	}
}

// keepHandoff gives c, which did not go, back to its loop: reading
// resumes, and it is closed the protocol's way (counted as failed).
func (l *Loop) keepHandoff(c *Conn) {
	if c.closed() {
		return
	}
	l.cnt[sHandoffFailed]++
	c.state = c.state&^stHandoff | stNoHandoff
	l.d.resumeRead(c)
	l.sweep(c)
}
