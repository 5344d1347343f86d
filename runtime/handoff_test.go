package runtime_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// hoHandler is a line protocol that keeps state per connection: the first
// line names the connection, and each later line is answered with the
// process's name, the connection's name and the line. A partial line is
// held (OnHandover says later); the name is the state that crosses.
type hoHandler struct {
	name     string
	decline  func(id string) bool // OnHandover declines these
	adopted  atomic.Int64
	byes     atomic.Int64
	states   sync.Map // id -> the state OnAdopt got
	handedTo atomic.Int64
	closes   atomic.Int64
	pad      int // bytes of padding after the name in the state (to make messages fill up)
}

type hoConn struct {
	id      string
	partial []byte
}

func (h *hoHandler) OnOpen(c *percore.Conn) { c.SetValue(&hoConn{}) }

func (h *hoHandler) OnAdopt(c *percore.Conn, state []byte) {
	h.adopted.Add(1)
	id, _, _ := strings.Cut(string(state), "|")
	h.states.Store(id, true)
	c.SetValue(&hoConn{id: id})
}

func (h *hoHandler) OnClose(c *percore.Conn, err error) { h.closes.Add(1) }

func (h *hoHandler) OnData(c *percore.Conn, data []byte) {
	st := c.Value().(*hoConn)
	st.partial = append(st.partial, data...)
	for {
		i := bytes.IndexByte(st.partial, '\n')
		if i < 0 {
			return
		}
		line := string(st.partial[:i])
		st.partial = append(st.partial[:0], st.partial[i+1:]...)
		switch {
		case st.id == "":
			st.id = line
			if strings.HasPrefix(line, "tls") {
				c.DeclineHandover()
			}
			fmt.Fprintf(c, "ok %s\n", h.name)
		default:
			fmt.Fprintf(c, "%s %s %s\n", h.name, st.id, line)
		}
	}
}

func (h *hoHandler) OnHandover(c *percore.Conn) ([]byte, error) {
	st := c.Value().(*hoConn)
	switch {
	case len(st.partial) > 0 || st.id == "":
		return nil, percore.ErrHandoverLater
	case h.decline != nil && h.decline(st.id):
		return nil, percore.ErrHandoverDeclined
	}
	h.handedTo.Add(1)
	if h.pad > 0 {
		return []byte(st.id + "|" + strings.Repeat("x", h.pad)), nil
	}
	return []byte(st.id), nil
}

// OnShutdown is the protocol's goodbye: a line, then a close.
func (h *hoHandler) OnShutdown(c *percore.Conn) {
	h.byes.Add(1)
	fmt.Fprintf(c, "bye %s\n", h.name)
	c.Close()
}

var (
	_ percore.HandoverHandler = (*hoHandler)(nil)
	_ percore.AdoptHandler    = (*hoHandler)(nil)
	_ percore.OpenHandler     = (*hoHandler)(nil)
	_ percore.ShutdownHandler = (*hoHandler)(nil)
)

// hoPair is an old runtime serving TCP and Unix, and a new one that
// serves its listeners and adopts its connections.
type hoPair struct {
	old, next       *percore.Runtime
	oldH, nextH     *hoHandler
	tcp, unixPath   string
	oldEnd, nextEnd *os.File
	b               percore.Backend
	cores           []int
	nextTLS         *tls.Config // the new runtime's Config.TLS, for the old one's tls:// listeners
	// mu orders a proxy's hook (handoff_faults_test.go) with the test
	// reading what it recorded.
	mu sync.Mutex
}

func newHoPair(t *testing.T, b percore.Backend, decline func(string) bool, logger ...*slog.Logger) *hoPair {
	t.Helper()
	var lg *slog.Logger
	if len(logger) > 0 {
		lg = logger[0]
	}
	p := &hoPair{oldH: &hoHandler{name: "A", decline: decline}, nextH: &hoHandler{name: "B"}}
	p.unixPath = filepath.Join(shortDir(t), "ho.sock")
	cores := allCores(t)
	if len(cores) > 2 {
		cores = cores[:2]
	}
	p.old = start(t, percore.Config{Backend: b, Addr: "127.0.0.1:0", Listen: []string{"unix://" + p.unixPath},
		Cores: cores, Logger: lg}, p.oldH)
	p.tcp = p.old.Addr().String()
	var err error
	p.oldEnd, p.nextEnd, err = percore.HandoverSockets()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.oldEnd.Close(); p.nextEnd.Close() })
	p.b, p.cores = b, cores
	return p
}

// startNext starts the new runtime on the old one's listeners (after the
// clients connected: it accepts from the same sockets).
func (p *hoPair) startNext(t *testing.T) {
	t.Helper()
	files, err := p.old.ListenerFiles()
	if err != nil {
		t.Fatal(err)
	}
	p.next = start(t, percore.Config{Backend: p.b, Inherited: files, Cores: p.cores, TLS: p.nextTLS}, p.nextH)
	for _, f := range files {
		f.Close()
	}
}

// hoClient is one kept-alive connection of the tests.
type hoClient struct {
	c  net.Conn
	r  *bufio.Reader
	id string
}

func (p *hoPair) dial(t *testing.T, i int, prefix string) *hoClient {
	t.Helper()
	network, address := "tcp", p.tcp
	if i%2 == 1 {
		network, address = "unix", p.unixPath
	}
	c, err := net.DialTimeout(network, address, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	cl := &hoClient{c: c, r: bufio.NewReader(c), id: fmt.Sprintf("%s%d", prefix, i)}
	if got, err := cl.ask(cl.id); err != nil || got != "ok A" {
		t.Fatalf("hello %s: %q, %v", cl.id, got, err)
	}
	return cl
}

// ask writes line and reads one answer line.
func (cl *hoClient) ask(line string) (string, error) {
	if _, err := cl.c.Write([]byte(line + "\n")); err != nil {
		return "", err
	}
	s, err := cl.r.ReadString('\n')
	return strings.TrimSuffix(s, "\n"), err
}

// handOver runs the old runtime's HandOver (the new one adopting) and
// returns its result on a channel.
func (p *hoPair) handOver(t *testing.T, d time.Duration) <-chan error {
	t.Helper()
	p.startNext(t)
	if err := p.next.Adopt(p.nextEnd); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	ctx := shutdownCtx(t, d)
	go func() { done <- p.old.HandOver(ctx, p.oldEnd) }()
	return done
}

// Idle kept-alive connections, TCP and Unix, move to the new runtime with
// their state: each next request is answered there, and no client sees a
// close.
func TestHandoverIdleConnections(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		p := newHoPair(t, b, nil)
		const n = 60
		clients := make([]*hoClient, n)
		for i := range clients {
			clients[i] = p.dial(t, i, "c")
		}
		if err := pctest.Recv(t, p.handOver(t, 20*time.Second), "the hand-over"); err != nil {
			t.Fatal(err)
		}
		for _, cl := range clients {
			got, err := cl.ask("after")
			if want := "B " + cl.id + " after"; err != nil || got != want {
				t.Fatalf("%s after the hand-over: %q, %v; want %q", cl.id, got, err, want)
			}
		}
		st, nst := p.old.Stats(), p.next.Stats()
		if st.HandedOff != n || st.HandoffDeclined != 0 || st.HandoffFailed != 0 || st.Open != 0 {
			t.Fatalf("old: handed %d declined %d failed %d open %d; want %d, 0, 0, 0", st.HandedOff, st.HandoffDeclined, st.HandoffFailed, st.Open, n)
		}
		if nst.Adopted != n || nst.Open != n || p.nextH.adopted.Load() != n {
			t.Fatalf("new: adopted %d open %d OnAdopt %d; want %d", nst.Adopted, nst.Open, p.nextH.adopted.Load(), n)
		}
		if p.oldH.byes.Load() != 0 {
			t.Fatalf("%d goodbyes: a handed-over connection got the protocol's close", p.oldH.byes.Load())
		}
		if err := p.old.HandOver(context.Background(), p.oldEnd); !errors.Is(err, percore.ErrHandoverRunning) {
			t.Fatalf("a second HandOver: %v, want ErrHandoverRunning", err)
		}
	})
}

// Clients keep sending while the hand-over runs, each request at a seeded
// random moment and some split in two writes (a partial line: OnHandover
// says later). The oracle: every request is answered, in order, first by
// the old process and then by the new one, never by the old one again;
// nothing fails and nobody sees a close.
func TestHandoverUnderLoad(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		p := newHoPair(t, b, nil)
		const n = 24
		var moved atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, n)
		handing := make(chan struct{})
		for i := range n {
			cl := p.dial(t, i, "c")
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				onB := false
				<-handing
				for k := 0; k < 400 && !(onB && k > 40); k++ {
					line := fmt.Sprintf("q%d", k)
					if rng.IntN(4) == 0 {
						// Half a line in one write, the rest in the next.
						if _, err := cl.c.Write([]byte(line[:1])); err != nil {
							errs <- err
							return
						}
						line = line[1:]
					}
					got, err := cl.ask(line)
					if err != nil {
						errs <- fmt.Errorf("%s request %d: %w", cl.id, k, err)
						return
					}
					from, rest, _ := strings.Cut(got, " ")
					if rest != cl.id+" q"+fmt.Sprint(k) || (from != "A" && from != "B") || (onB && from == "A") {
						errs <- fmt.Errorf("%s request %d: %q (on the new process: %v)", cl.id, k, got, onB)
						return
					}
					if from == "B" && !onB {
						onB = true
						moved.Add(1)
					}
				}
				if !onB {
					errs <- fmt.Errorf("%s never reached the new process", cl.id)
				}
			}()
		}
		close(handing)
		if err := pctest.Recv(t, p.handOver(t, 20*time.Second), "the hand-over"); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if st := p.old.Stats(); st.HandedOff != n || moved.Load() != n {
			t.Fatalf("handed %d, moved %d; want %d", st.HandedOff, moved.Load(), n)
		}
	})
}

// Connections that decline (the handler, or the connection itself as a TLS
// one would) are closed the protocol's way: their goodbye, then the close;
// the others move.
func TestHandoverDeclined(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		p := newHoPair(t, b, func(id string) bool { return strings.HasPrefix(id, "no") })
		var clients []*hoClient
		for i := range 12 {
			prefix := []string{"c", "no", "tls"}[i%3]
			clients = append(clients, p.dial(t, i, prefix))
		}
		if err := pctest.Recv(t, p.handOver(t, 20*time.Second), "the hand-over"); err != nil {
			t.Fatal(err)
		}
		for _, cl := range clients {
			if strings.HasPrefix(cl.id, "c") {
				if got, err := cl.ask("x"); err != nil || got != "B "+cl.id+" x" {
					t.Fatalf("%s: %q, %v", cl.id, got, err)
				}
				continue
			}
			s, err := cl.r.ReadString('\n')
			if s != "bye A\n" || err != nil {
				t.Fatalf("%s: %q, %v; want the old process's goodbye", cl.id, s, err)
			}
			if _, err := cl.r.ReadByte(); err == nil {
				t.Fatalf("%s: more after the goodbye", cl.id)
			}
		}
		if st := p.old.Stats(); st.HandedOff != 4 || st.HandoffDeclined != 8 || p.oldH.byes.Load() != 8 {
			t.Fatalf("handed %d declined %d byes %d; want 4, 8, 8", st.HandedOff, st.HandoffDeclined, p.oldH.byes.Load())
		}
	})
}
