//go:build linux

package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/percore/percore/examples/internal/restart"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame/ws"
	"github.com/percore/percore/runtime/httpd"
)

// A restart that keeps every subscriber (docs/decisions/0059): on SIGHUP
// the gateway starts a new copy of itself (examples/internal/restart),
// and hands it each client between messages with its state: the codec's
// (ws.Conn.AppendState), its user and its topics. The new process makes
// the client again (gateway.adopt, httpd.Config.AdoptUpgraded) and
// subscribes it where it was, so that the client sees nothing: no close,
// no new handshake, no SUB again. A client that cannot go (its state over
// percore.MaxHandoverState, a compression context, TLS, the grace deadline
// while a frame is half read) is closed with 1012 (service restart).
//
// A publish must reach every subscriber once, while the subscribers are
// split between two processes. So the old process, from the start of the
// hand-over, delivers no publish itself: it forwards each it still reads
// to the new process (loopback HTTP, marked forwarded); and the new
// process holds every publish until the old one has let go of its last
// subscriber (restart.Parent.Release; its exit too), or -grace passed,
// and then fans them out in the order they came. A publish during a
// restart is late by up to one hand-over; none is lost.

// forwardedHeader marks a publish one gateway process forwarded to the
// next: it is delivered where it arrives, never forwarded again.
const forwardedHeader = "X-Gateway-Forwarded"

// restartState is the gateway's part of a restart. It is safe for
// concurrent use.
type restartState struct {
	// Old side.
	handingOver atomic.Bool // publishes go to the new process; goodbyes are 1012
	parent      atomic.Pointer[restart.Parent]
	forwardTo   string // the address the new process accepts on
	client      *http.Client
	log         *slog.Logger
	// delivering counts publishes being fanned out over the loops; the
	// hand-over waits until none is.
	delivering atomic.Int64
	// clients counts the subscribers open in this process: the old side
	// releases the new one when it reaches zero.
	clients atomic.Int64

	// New side.
	mu      sync.Mutex
	holding bool // publishes wait for the old process (held)
	hold    atomic.Bool
	held    []heldPublish
}

// heldPublish is a publish that came while the old process still held
// subscribers.
type heldPublish struct {
	w     *httpd.Response
	l     *percore.Loop
	topic string
	body  []byte
}

// divert takes a publish that must not be delivered here now: on the old
// side of a hand-over it is forwarded to the new process, on the new
// side, until the old one let go, it is held. It reports whether it took
// it.
func (g *gateway) divert(w *httpd.Response, r *httpd.Request, topic, body []byte) bool {
	s := &g.ho
	if s.handingOver.Load() && len(r.Header(forwardedHeader)) == 0 {
		g.forward(w, r.Conn().Loop(), string(topic), bytes.Clone(body))
		return true
	}
	if !s.hold.Load() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.holding {
		return false
	}
	w.Hold()
	s.held = append(s.held, heldPublish{w: w, l: r.Conn().Loop(), topic: string(topic), body: bytes.Clone(body)})
	return true
}

// holdUntil holds publishes until released is closed or grace passes,
// then fans out what it held, each on the loop it came on, in order.
func (g *gateway) holdUntil(released <-chan struct{}, grace time.Duration) {
	s := &g.ho
	s.mu.Lock()
	s.holding = true
	s.hold.Store(true)
	s.mu.Unlock()
	go func() {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-released:
		case <-t.C:
		}
		s.mu.Lock()
		held := s.held
		s.held, s.holding = nil, false
		s.hold.Store(false)
		s.mu.Unlock()
		for _, p := range held {
			if p.l.Post(func() { g.fanout(p.w, p.l, p.topic, p.body) }) != nil {
				continue // the loop stopped: nobody to answer
			}
		}
	}()
}

// forward posts a publish to the new process and answers w with its
// answer, on l. Should the new process not answer, the publish is
// delivered here to whoever is still here, and the failure logged.
func (g *gateway) forward(w *httpd.Response, l *percore.Loop, topic string, body []byte) {
	s := &g.ho
	w.Hold()
	go func() {
		n, err := s.post(topic, body)
		l.Post(func() {
			if err != nil {
				s.log.Warn("ws_gateway: forwarding a publish to the new process failed; delivered here", "err", err)
				g.fanout(w, l, topic, body)
				return
			}
			w.AddHeader("Content-Type", "text/plain")
			w.Write(strconv.AppendInt(nil, int64(n), 10))
			w.End()
		})
	}()
}

func (s *restartState) post(topic string, body []byte) (int, error) {
	req, err := http.NewRequest("POST", "http://"+s.forwardTo+"/publish?topic="+url.QueryEscape(topic), bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set(forwardedHeader, "1")
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("%s: %.100s", resp.Status, b)
	}
	return strconv.Atoi(string(b))
}

// gone is a subscriber's close: the old side releases the new one after
// its last.
func (s *restartState) gone() {
	if s.clients.Add(-1) == 0 && s.handingOver.Load() {
		if p := s.parent.Load(); p != nil {
			p.Release()
		}
	}
}

// beginHandover turns the old side's publishing off (forwarded from now)
// and waits, at most until deadline, for the publishes being fanned out
// to finish, so that none meets a subscriber on its way.
func (g *gateway) beginHandover(p *restart.Parent, addr string, deadline time.Time) {
	s := &g.ho
	s.forwardTo = addr
	s.client = &http.Client{Timeout: time.Until(deadline)}
	s.parent.Store(p)
	s.handingOver.Store(true)
	for s.delivering.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond) // polling a counter: a fan-out takes a loop turn
	}
	if s.clients.Load() == 0 {
		p.Release()
	}
}

// OnHandover hands the client over between messages, with its state
// (percore.HandoverHandler, asked through httpd): later while a message is
// partly received, declined once it is closing, when its codec keeps a
// compression context, or when its topics do not fit in
// percore.MaxHandoverState (it is closed with 1012 instead).
func (cl *client) OnHandover(c *percore.Conn) ([]byte, error) {
	st, err := cl.wc.AppendState(nil)
	switch {
	case errors.Is(err, ws.ErrInMessage):
		return nil, percore.ErrHandoverLater
	case err != nil:
		return nil, percore.ErrHandoverDeclined
	}
	st = appendString(st, cl.ls.user(cl))
	topics := cl.ls.topics.topics(cl)
	st = binary.AppendUvarint(st, uint64(len(topics)))
	for _, t := range topics {
		st = appendString(st, t)
	}
	if len(st) > percore.MaxHandoverState-1 { // httpd's tag byte goes first
		return nil, percore.ErrHandoverDeclined
	}
	cl.ls.n.handedOver.Add(1)
	return st, nil
}

func appendString[S string | []byte](b []byte, s S) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// errState is an adopted client's state that this gateway cannot read.
var errState = errors.New("ws_gateway: adopted client: bad state")

// errFull is an adopted client its loop has no room for.
var errFull = errors.New("ws_gateway: adopted client: the loop holds all the clients it can")

// readString reads what appendString wrote: a view of b.
func readString(b []byte) ([]byte, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return nil, b, errState
	}
	return b[k : k+int(n)], b[k+int(n):], nil
}

// adopt makes the client the old process handed over (httpd's
// Config.AdoptUpgraded), on c's loop, and subscribes it to its topics.
func (g *gateway) adopt(c *percore.Conn, state []byte) (httpd.UpgradeHandler, error) {
	ls := g.loops.Get(c.Loop())
	cl := &client{c: c, ls: ls}
	rest, err := cl.wc.Resume(ls.pool, state)
	if err != nil {
		return nil, err
	}
	user, rest, err := readString(rest)
	if err != nil {
		return nil, err
	}
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > uint64(len(rest)) {
		return nil, errState
	}
	rest = rest[k:]
	topics := make([][]byte, 0, n)
	for range n {
		var t []byte
		if t, rest, err = readString(rest); err != nil {
			return nil, err
		}
		if !validTopic(t) {
			return nil, errState
		}
		topics = append(topics, t)
	}
	if len(rest) != 0 {
		return nil, errState
	}
	if !ls.enter(cl, user) {
		return nil, errFull
	}
	for _, t := range topics {
		ls.topics.join(cl, t)
	}
	ls.n.adopted.Add(1)
	g.ho.clients.Add(1)
	c.SetIdleTimeout(0) // the heartbeat's
	return cl, nil
}
