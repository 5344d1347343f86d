//go:build linux

package runtime

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/percore/percore/internal/sys"
	"golang.org/x/sys/unix"
)

// The new process's side of a restart's hand-over (docs/decisions/0054):
// one goroutine receives the old process's messages, acknowledges each,
// and posts the connections to the loops, spread as a shared listener's
// accepts are (spreadConn); each loop opens them as its own and calls the
// handler's OnAdopt.

// adoptIn is the receiver.
type adoptIn struct {
	rt   *Runtime
	conn *net.UnixConn
	lns  map[string]*Listener
	next int // the loop the next connection goes to
	done chan struct{}
}

// adoptItem is one connection for a loop: its descriptor, its listener
// in this runtime (nil when this runtime has none of that name) and its
// handler's state.
type adoptItem struct {
	fd    int
	ln    *Listener
	state []byte
}

// Adopt takes over the connections an old process hands over on from (the
// file HandoffFile found; the old process calls HandOver): each is
// opened on one of this runtime's loops, spread over them, and its
// handler's OnAdopt (else OnOpen) runs with the state the old process's
// OnHandover attached. The peer's bytes that arrived meanwhile are read as
// usual. Call it once the runtime serves; it returns at once, and the
// connections arrive until the old process ends the hand-over (or dies:
// what arrived is served), or this runtime closes. from may be closed
// once Adopt returns.
func (rt *Runtime) Adopt(from *os.File) error {
	uc, err := handoffConn(from)
	if err != nil {
		return err
	}
	if len(rt.loops) == 0 {
		uc.Close()
		return fmt.Errorf("percore: adopt: %w", net.ErrClosed)
	}
	a := &adoptIn{rt: rt, conn: uc, lns: make(map[string]*Listener), done: make(chan struct{})}
	for _, ln := range rt.lns {
		a.lns[ln.String()] = ln
	}
	if !rt.adopt.CompareAndSwap(nil, a) {
		uc.Close()
		return errors.New("percore: adopt: this runtime adopts from another process already")
	}
	go a.run()
	return nil
}

// stopAdopt ends the receiver (Close): what it received is posted to the
// loops before they stop.
func (rt *Runtime) stopAdopt() {
	if a := rt.adopt.Load(); a != nil {
		a.conn.Close()
		<-a.done
	}
}

func (a *adoptIn) run() {
	defer close(a.done)
	defer a.conn.Close()
	log := a.rt.cfg.Logger
	buf := make([]byte, handoffMsgMax+1)
	oob := make([]byte, unix.CmsgSpace(handoffBatch*4))
	var recs []handoffRecord
	var ack []byte
	adopted := 0
	for {
		n, oobn, flags, _, err := a.conn.ReadMsgUnix(buf, oob)
		if err != nil || (n == 0 && oobn == 0) {
			switch {
			case err == nil, errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
				log.Info("percore: adopted connections from the old process", "adopted", adopted)
			case errors.Is(err, net.ErrClosed):
			default:
				log.Error("percore: adopt: receive", "err", err, "adopted", adopted)
			}
			return
		}
		fds, ferr := rightsOf(oob[:oobn])
		seq, rs, derr := decodeHandoff(buf[:n], recs)
		recs = rs
		taken := len(fds)
		switch {
		case ferr != nil || derr != nil:
			log.Error("percore: adopt: message refused", "err", errors.Join(ferr, derr))
			taken = 0
		case len(fds) > len(recs):
			log.Error("percore: adopt: message refused", "err", fmt.Sprintf("%d descriptors for %d records", len(fds), len(recs)))
			taken = 0
		case len(fds) < len(recs) || flags&unix.MSG_CTRUNC != 0:
			// Out of descriptors: the kernel passed the first ones only;
			// the old process keeps the rest.
			log.Warn("percore: adopt: received part of a batch (out of descriptors?)", "records", len(recs), "descriptors", len(fds))
		}
		for _, fd := range fds[taken:] {
			_ = sys.Close(fd)
		}
		ack = appendAck(ack[:0], seq, taken)
		if _, err := a.conn.Write(ack); err != nil {
			// The old process is gone: it can no longer serve these, so
			// this one does.
			log.Warn("percore: adopt: acknowledge", "err", err)
		}
		a.spread(fds[:taken], recs[:taken])
		adopted += taken
	}
}

// rightsOf returns the descriptors of the SCM_RIGHTS messages in oob.
func rightsOf(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for i := range msgs {
		f, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			continue
		}
		fds = append(fds, f...)
	}
	return fds, nil
}

// spread posts the connections of one message to the loops, one post per
// loop; their states are copied out of the message buffer into one block.
func (a *adoptIn) spread(fds []int, recs []handoffRecord) {
	if len(fds) == 0 {
		return
	}
	size := 0
	for _, r := range recs {
		size += len(r.state)
	}
	block := make([]byte, 0, size)
	loops := a.rt.loops
	per := make([][]adoptItem, len(loops))
	for i, fd := range fds {
		var st []byte
		if s := recs[i].state; len(s) > 0 {
			at := len(block)
			block = append(block, s...)
			st = block[at:len(block):len(block)]
		}
		k := a.next % len(loops)
		a.next++
		per[k] = append(per[k], adoptItem{fd: fd, ln: a.lns[recs[i].ln], state: st})
	}
	for k, items := range per {
		if len(items) == 0 {
			continue
		}
		l := loops[k]
		if l.post(func() { l.adoptConns(items) }, true) != nil {
			for _, it := range items {
				_ = sys.Close(it.fd) // the loop stopped: this runtime serves nothing more
			}
		}
	}
}

// adoptConns opens connections handed over by the old process on l.
func (l *Loop) adoptConns(items []adoptItem) {
	for _, it := range items {
		if l.forced {
			_ = sys.Close(it.fd)
			continue
		}
		l.cnt[sAdopted]++
		c := l.newConn(it.fd, l.h)
		c.ln = it.ln
		c.state |= stSpoke // established: no first-request grace at a shutdown
		if err := l.d.start(c); err != nil {
			l.closeConn(c, c.opError("read", err))
			continue
		}
		l.openTimers(c)
		l.callOnAdopt(c, it.state)
		l.sweepLate(c)
	}
	// Adopted connections count against Config.MaxConns as accepted ones
	// do: none is refused (each is a client already connected, which a
	// close would only send back to reconnect), but at the cap the loop
	// stops accepting new ones until enough have closed.
	if !l.canAccept() && l.accept.holds&holdCap == 0 {
		l.cnt[sCapHolds]++
		l.hold(holdCap)
	}
}

// callOnAdopt runs c's handler's OnAdopt, else its OnOpen.
func (l *Loop) callOnAdopt(c *Conn, state []byte) {
	ah, ok := c.h.(AdoptHandler)
	if !ok {
		l.callOnOpen(c)
		return
	}
	l.depth++
	defer l.endCall(c)
	ah.OnAdopt(c, state)
}
