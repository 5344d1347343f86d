//go:build linux

package pctest

import (
	"bufio"
	"net"
	"sync"
	"testing"
)

// Server is a plain net TCP server on 127.0.0.1 for tests that need a peer
// which is not percore (an upstream, a server for the load generator): one
// goroutine per connection runs its handler, and the connection closes
// when the handler returns. The test's cleanup kills it.
type Server struct {
	handle func(net.Conn)
	wg     sync.WaitGroup

	mu      sync.Mutex
	addr    string
	ln      net.Listener
	conns   map[net.Conn]bool
	accepts int
}

// Serve starts a Server on a free port of 127.0.0.1 that runs handle for
// every connection it accepts.
func Serve(t testing.TB, handle func(net.Conn)) *Server {
	t.Helper()
	s := &Server{handle: handle, addr: "127.0.0.1:0", conns: map[net.Conn]bool{}}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// Start listens again, on the address the server first had, after Kill.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return err
	}
	s.ln = ln
	s.addr = ln.Addr().String()
	s.wg.Add(1)
	go s.serve(ln)
	return nil
}

func (s *Server) serve(ln net.Listener) {
	defer s.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.ln != ln { // killed since the accept
			s.mu.Unlock()
			c.Close()
			return
		}
		s.accepts++
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
			s.handle(c)
		}()
	}
}

// Addr is the server's address.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Accepted is how many connections the server has accepted.
func (s *Server) Accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepts
}

// Each runs f on every connection open now.
func (s *Server) Each(f func(net.Conn)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		f(c)
	}
}

// Kill closes the listener and every open connection, and waits for the
// handlers to return. A handler blocked on anything but its connection
// must be released first.
func (s *Server) Kill() {
	s.mu.Lock()
	if s.ln != nil {
		s.ln.Close()
		s.ln = nil
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// DeadAddr returns a loopback address that nothing listens on: connecting
// to it is refused.
func DeadAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// LineEcho is a handler that writes back every line it reads.
func LineEcho(c net.Conn) {
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		if _, err := c.Write(line); err != nil {
			return
		}
	}
}
