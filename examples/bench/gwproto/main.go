package gwproto

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Serve is a gateway's server: it serves ln with flags f until ctx is done,
// then closes every connection and returns.
type Serve func(ctx context.Context, ln net.Listener, f Flags) error

// Main is a gateway's main: it parses the flags, listens, prints
// "listening on ADDR" on stderr and serves until SIGINT or SIGTERM.
func Main(name string, serve Serve) {
	var f Flags
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	f.Register(fs)
	_ = fs.Parse(os.Args[1:])
	if err := f.Check(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", f.Addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "%s: listening on %s\n", name, ln.Addr())
	if err := serve(ctx, ln, f); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// Set is a set of connections, to close them all at shutdown.
type Set[C comparable] struct {
	mu     sync.Mutex
	m      map[C]struct{}
	closed bool
}

// Add adds c; it reports false (and adds nothing) once Close has run.
func (s *Set[C]) Add(c C) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if s.m == nil {
		s.m = make(map[C]struct{})
	}
	s.m[c] = struct{}{}
	return true
}

// Remove removes c.
func (s *Set[C]) Remove(c C) {
	s.mu.Lock()
	delete(s.m, c)
	s.mu.Unlock()
}

// Len returns how many connections the set holds.
func (s *Set[C]) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// Close calls fn for every connection (outside the lock) and refuses
// later Adds.
func (s *Set[C]) Close(fn func(C)) {
	s.mu.Lock()
	s.closed = true
	all := make([]C, 0, len(s.m))
	for c := range s.m {
		all = append(all, c)
	}
	s.mu.Unlock()
	for _, c := range all {
		fn(c)
	}
}
