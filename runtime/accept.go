//go:build linux

package runtime

import (
	"errors"
	"time"

	"github.com/percore/percore/internal/sys"
	"golang.org/x/sys/unix"
)

// acceptState is everything the loop knows about accepting: why it is held,
// and the current accept-failure episode. The loop is its only owner; the
// drivers are told when accepting stops and starts (pauseAccept,
// resumeAccept) and ask accepting() before they arm or accept.
type acceptState struct {
	holds acceptHold

	// The episode: its failures, the current back-off, when it last
	// failed, whether an accept has succeeded since, and whether the
	// timer that ends it after a quiet spell is pending.
	backoff    time.Duration
	errs       int
	lastErr    time.Time
	recovered  bool
	quietArmed bool

	// waiting reports whether a connection waits in the listener's
	// backlog (backlogWaiting; a test's stand-in).
	waiting func(lnfd int) bool
}

// acceptHold is the set of reasons accepting is held.
type acceptHold uint8

const (
	holdCap     acceptHold = 1 << iota // at Config.MaxConns
	holdBackoff                        // backing off after a failure
	holdTLS                            // at Config.MaxHandshakes TLS handshakes (tls.go)
)

// accepting reports whether the loop takes connections now: it has stream
// listeners and nothing holds accepting.
func (l *Loop) accepting() bool { return l.streams > 0 && !l.stopping && l.accept.holds == 0 }

// hold adds a reason to hold accepting; the driver stops at the first.
func (l *Loop) hold(why acceptHold) {
	was := l.accept.holds
	l.accept.holds |= why
	if was == 0 && l.streams > 0 {
		l.d.pauseAccept()
	}
}

// unhold removes a reason to hold accepting; the driver resumes when none
// is left.
func (l *Loop) unhold(why acceptHold) {
	if l.accept.holds&why == 0 {
		return
	}
	l.accept.holds &^= why
	if l.accept.holds == 0 && l.streams > 0 && !l.stopping {
		l.d.resumeAccept()
	}
}

// canAccept reports whether the loop is below its connection cap.
func (l *Loop) canAccept() bool {
	return l.cfg.MaxConns == 0 || l.open < l.cfg.MaxConns
}

// maybeResumeAccept releases the cap's hold once the loop is below it.
func (l *Loop) maybeResumeAccept() {
	if l.accept.holds&holdCap != 0 && l.canAccept() {
		l.unhold(holdCap)
	}
}

// acceptOutcome is what one accept result means for the listener.
type acceptOutcome uint8

const (
	acceptNext acceptOutcome = iota // accepted, or one connection's error: accept the next
	acceptIdle                      // out of resources, none waiting: wait for a connection first
	acceptHeld                      // accepting is held (the cap, a back-off, shutdown)
)

// acceptResult is the driver's report of one accept on the loop's stream
// listener ln (its index in the loop's listeners): a new descriptor fd, or
// errno. It opens the connection, or applies the accept-failure policy, and
// says what the driver does next.
//
// A connection the kernel accepted for the loop while a graceful shutdown
// began (a multishot accept's completion that was already on its way) is
// served like the others, and closed once idle: its client did connect,
// and after a restart that handed the listener to a new process (see
// docs/operations.md) nobody else will answer it. Only a forced stop
// (Close, or Shutdown's deadline) closes it unanswered.
func (l *Loop) acceptResult(fd int, errno unix.Errno, ln int) acceptOutcome {
	if errno != 0 {
		return l.acceptFailed(errnoErr("accept", errno), l.listenerFd(ln))
	}
	if l.forced || ln < 0 || ln >= len(l.lns) || l.lns[ln].info.Datagram() {
		_ = sys.Close(fd) // accepted as the loop was stopped
		return acceptHeld
	}
	l.acceptOK()
	if info := l.lns[ln].info; !info.Shared || !l.spreadConn(fd, info) {
		l.accepted(fd, info)
	}
	if !l.canAccept() && l.accept.holds&holdCap == 0 {
		l.cnt[sCapHolds]++
		l.hold(holdCap)
	}
	if !l.accepting() {
		return acceptHeld
	}
	return acceptNext
}

// acceptFailed handles an accept error on the listening socket lnfd.
// Per-connection errors are skipped silently. A shortage of descriptors or
// memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) is only a failure when a
// connection is waiting: the kernel checks for a free descriptor before it
// looks at the backlog, so a loop at its descriptor limit fails every
// accept, also with nobody to refuse. A failure (that, or any other error
// on the listener) holds accepting for a back-off that grows from 10 ms to
// 1 s, is counted, and is logged once per episode.
func (l *Loop) acceptFailed(err error, lnfd int) acceptOutcome {
	a := &l.accept
	if isTransientAcceptError(err) {
		return acceptNext
	}
	waiting := a.waiting
	if waiting == nil {
		waiting = backlogWaiting
	}
	if isResourceError(err) && !waiting(lnfd) {
		return acceptIdle
	}
	if a.errs == 0 {
		l.log.Warn("percore: accept failing, backing off", "loop", l.id, "err", err)
	}
	a.errs++
	a.lastErr = l.now
	a.recovered = false
	l.cnt[sAcceptErrors]++
	if a.backoff == 0 {
		a.backoff = acceptBackoffMin
	} else {
		a.backoff = min(2*a.backoff, acceptBackoffMax)
	}
	if l.accept.holds&holdBackoff == 0 {
		l.hold(holdBackoff)
		l.AfterFunc(a.backoff, func() { l.unhold(holdBackoff) })
	}
	return acceptHeld
}

// acceptOK notes an accepted connection. During an episode, progress
// restarts the back-off from its minimum, but the episode ends only after
// acceptQuiet with no failure: descriptors usually come back one at a
// time, and each would otherwise end one episode and start the next.
func (l *Loop) acceptOK() {
	a := &l.accept
	if a.errs == 0 {
		return
	}
	a.backoff = 0
	a.recovered = true
	if !a.quietArmed {
		a.quietArmed = true
		l.AfterFunc(acceptQuiet, l.endAcceptEpisode)
	}
}

// endAcceptEpisode ends the episode if accepts have succeeded since the
// last failure and acceptQuiet has passed without one; if accepting is
// still failing, the next success arms it again.
func (l *Loop) endAcceptEpisode() {
	a := &l.accept
	a.quietArmed = false
	if a.errs == 0 || !a.recovered {
		return
	}
	if quiet := l.now.Sub(a.lastErr); quiet < acceptQuiet {
		a.quietArmed = true
		l.AfterFunc(acceptQuiet-quiet, l.endAcceptEpisode)
		return
	}
	l.log.Info("percore: accepting again", "loop", l.id, "errors", a.errs)
	a.errs = 0
	a.backoff = 0
}

// isResourceError reports an accept error that says the process or the
// system is short of descriptors or memory.
func isResourceError(err error) bool {
	return errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) ||
		errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.ENOMEM)
}

// backlogWaiting reports whether a connection waits in the listening
// socket lnfd's backlog. When it cannot tell, it says yes: backing off is
// the safe answer.
func backlogWaiting(lnfd int) bool {
	return sys.Readable(lnfd)
}

// isTransientAcceptError reports errors that concern one connection (it
// was aborted before it was accepted, a firewall refused it): skip them.
func isTransientAcceptError(err error) bool {
	return errors.Is(err, unix.ECONNABORTED) || errors.Is(err, unix.EPROTO) ||
		errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENETDOWN) ||
		errors.Is(err, unix.ENOPROTOOPT) || errors.Is(err, unix.EHOSTDOWN) ||
		errors.Is(err, unix.ENONET) || errors.Is(err, unix.EHOSTUNREACH) ||
		errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENETUNREACH) ||
		errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR)
}
