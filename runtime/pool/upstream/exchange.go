//go:build linux

package upstream

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
	"github.com/percore/percore/runtime/pool"
)

// ErrReplyTimeout is the error of an exchange whose reply did not arrive
// within ExchangeConfig.Timeout. It matches os.ErrDeadlineExceeded.
var ErrReplyTimeout = fmt.Errorf("upstream: no reply in time: %w", os.ErrDeadlineExceeded)

// errBusy is a Do while an exchange is in progress.
var errBusy = errors.New("upstream: exchange already in progress")

// ExchangeConfig configures an Exchange. The zero value works: each field's
// zero means its default, and a negative limit or timeout means none.
type ExchangeConfig struct {
	// MaxReply is the most bytes of a reply held while it is partial
	// (frame.Splitter.MaxBuffered): a longer reply fails the exchange
	// with a *frame.TooLongError. Zero means frame.DefaultMaxBuffered;
	// negative means no limit.
	MaxReply int
	// Timeout bounds the wait for the reply, from the request's send.
	// Zero means the default, DefaultTimeout, which is none; negative
	// means none.
	Timeout time.Duration
	// Scanner, when set, makes the Exchange's frame.Scanner, which reads
	// the replies instead of NewExchange's split function (which may then
	// be nil): it keeps its progress through a partial reply, so that a
	// reply that arrives in many reads is examined once
	// (frame.NewLineScanner, resp.NewReplyScanner). Nil means the split
	// function, which examines a partial reply again at every read.
	Scanner func() frame.Scanner
}

// DefaultTimeout is ExchangeConfig.Timeout's default: no timeout, a reply
// may take as long as the upstream takes (the pool's ConnectionTimeout
// bounds the wait for a connection, not for a reply).
const DefaultTimeout time.Duration = 0

// Exchange is a request and its one reply on a leased connection: Do sends
// the request, reads the reply with a split function, and puts the lease
// back, broken if the exchange went wrong, before it says how it went.
// What tcp_pool and every proxy would otherwise write by hand.
//
// An Exchange runs one exchange at a time and allocates nothing for it:
// keep one per client connection (or per request in flight). It belongs to
// the thread of the Local's loop, as the Local does.
type Exchange struct {
	local *pool.Local[*Conn]
	cfg   ExchangeConfig
	sp    frame.Splitter

	lease pool.Lease[*Conn]
	done  func(reply []byte, err error)
	timer *percore.Timer
	reply []byte // the token the last Feed found
	got   bool

	// Bound once, so that an exchange allocates nothing for them.
	onDataFn    func([]byte)
	onCloseFn   func(error)
	onTimeoutFn func()
	emitFn      func([]byte) bool
}

// NewExchange returns an Exchange that returns its leases to local and
// reads each reply with split (bufio.SplitFunc: its first token is the
// reply; frame.ScanLines, resp's split functions, or one of your own), or
// with a Scanner of its own when cfg.Scanner is set.
func NewExchange(local *pool.Local[*Conn], split bufio.SplitFunc, cfg ExchangeConfig) *Exchange {
	if split == nil && cfg.Scanner == nil {
		panic("upstream: NewExchange with a nil split function and no Scanner")
	}
	x := &Exchange{local: local, cfg: cfg, sp: frame.Splitter{Split: split, MaxBuffered: cfg.MaxReply}}
	if cfg.Scanner != nil {
		x.sp.Scanner = cfg.Scanner()
	}
	x.onDataFn, x.onCloseFn, x.onTimeoutFn, x.emitFn = x.onData, x.onClose, x.onTimeout, x.emit
	return x
}

// Do sends req on lease's connection and reads exactly one reply. done
// runs once, on the loop's thread, after the lease went back to the pool:
// with the reply (valid only during the call) and a nil error, or with the
// reason the exchange failed: ErrReplyTimeout, a *frame.TooLongError (a
// reply over MaxReply), the split function's error, io.ErrUnexpectedEOF
// (the connection closed in the middle of the reply), or the connection's
// close or write error. A failed exchange's connection goes back marked
// broken, as does one that received more than the reply (it is out of
// step), so that the pool closes it instead of lending it again.
//
// done may run before Do returns (a write that fails at once). One
// exchange at a time: a Do while another is in progress fails at once, and
// its lease is not touched.
func (x *Exchange) Do(lease pool.Lease[*Conn], req []byte, done func(reply []byte, err error)) {
	if x.lease.Lent() {
		done(nil, errBusy)
		return
	}
	x.lease, x.done = lease, done
	uc := lease.Conn()
	uc.Receive(x.onDataFn, x.onCloseFn)
	if _, err := uc.Write(req); err != nil {
		x.finish(nil, fmt.Errorf("upstream: send the request: %w", err), true)
		return
	}
	if x.cfg.Timeout > 0 && x.lease.Lent() {
		if x.timer == nil {
			x.timer = uc.Raw().Loop().AfterFunc(x.cfg.Timeout, x.onTimeoutFn)
		} else {
			x.timer.Reset(x.cfg.Timeout)
		}
	}
}

// Busy reports whether an exchange is in progress.
func (x *Exchange) Busy() bool { return x.lease.Lent() }

// Cancel abandons the exchange in progress, if any (its client went away):
// the connection goes back broken, since its reply may still arrive, and
// done is not called.
func (x *Exchange) Cancel() {
	if !x.lease.Lent() {
		return
	}
	x.stopTimer()
	ls := x.lease
	x.lease, x.done = pool.Lease[*Conn]{}, nil
	uc := ls.Conn()
	uc.MarkBroken()
	uc.Receive(nil, nil)
	x.local.Put(ls)
	x.sp.Reset()
}

func (x *Exchange) emit(tok []byte) bool {
	x.reply, x.got = tok, true
	return false // exactly one reply
}

// onData splits what the upstream sent; the first token ends the exchange.
func (x *Exchange) onData(data []byte) {
	n, err := x.sp.Feed(data, x.emitFn)
	final := errors.Is(err, bufio.ErrFinalToken)
	switch {
	case err != nil && !final:
		x.finish(nil, fmt.Errorf("upstream: reply: %w", err), true)
	case x.got:
		x.finish(x.reply, nil, final || n < len(data))
	}
}

// onClose ends an exchange whose connection closed: with a last token the
// split function makes at the end of the stream, else as a short read.
func (x *Exchange) onClose(err error) {
	held := x.sp.Buffered()
	if endErr := x.sp.End(x.emitFn); endErr == nil && x.got {
		x.finish(x.reply, nil, true)
		return
	}
	if held > 0 {
		err = fmt.Errorf("upstream: connection closed after %d bytes of the reply: %w", held, io.ErrUnexpectedEOF)
	} else {
		err = fmt.Errorf("upstream: connection closed before the reply: %w", err)
	}
	x.finish(nil, err, true)
}

func (x *Exchange) onTimeout() {
	if x.lease.Lent() {
		x.finish(nil, ErrReplyTimeout, true)
	}
}

func (x *Exchange) stopTimer() {
	if x.timer != nil {
		x.timer.Stop()
	}
}

// finish ends the exchange: the lease goes back (broken if asked), and
// then done learns how it went.
func (x *Exchange) finish(reply []byte, err error, broken bool) {
	x.stopTimer()
	ls, done := x.lease, x.done
	x.lease, x.done = pool.Lease[*Conn]{}, nil
	uc := ls.Conn()
	if broken {
		uc.MarkBroken()
	}
	uc.Receive(nil, nil)
	x.local.Put(ls)
	// The reply stays where it is until the next exchange's Feed: Reset
	// keeps a small buffer's bytes, and drops a large one to the
	// collector.
	x.reply, x.got = nil, false
	x.sp.Reset()
	done(reply, err)
}
