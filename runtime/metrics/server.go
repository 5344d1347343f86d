//go:build linux

package metrics

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/percore/percore/runtime"
)

// Handler returns an http.Handler that serves /metrics (rt's collector,
// the extra collectors, and the Go runtime's and the process's collectors)
// and net/http/pprof under /debug/pprof/. It fails when two collectors
// export the same metric.
func Handler(rt *runtime.Runtime, extra ...prometheus.Collector) (http.Handler, error) {
	reg := prometheus.NewRegistry()
	cs := append([]prometheus.Collector{
		New(rt),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}, extra...)
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: register collector: %w", err)
		}
	}
	mux := http.NewServeMux()
	// ContinueOnError: a collector that fails (an extra one; percore's
	// own read published snapshots and cannot) costs its own series, not
	// the whole scrape.
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux, nil
}

// Server serves Handler on a side port. Its methods are safe for
// concurrent use.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
	err  error // Serve's error, once done is closed
}

// Listen listens on addr (host:port; port 0 picks one, see Addr) and serves
// Handler(rt, extra...) there from goroutines of its own, none of which
// runs on a loop's thread, until Close.
func Listen(addr string, rt *runtime.Runtime, extra ...prometheus.Collector) (*Server, error) {
	h, err := Handler(rt, extra...)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	s := &Server{
		// No write timeout: /debug/pprof/profile streams for its seconds.
		srv:  &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		ln:   ln,
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.err = err
		}
	}()
	return s, nil
}

// Addr returns the address the server listens on, with the port resolved.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// closeGrace is how long Close lets requests in progress finish.
const closeGrace = 2 * time.Second

// Close stops the server: it stops listening, lets requests in progress
// finish for up to two seconds, closes every connection and waits for the
// serving goroutine to return. It returns the error that stopped serving
// early, if any. A second Close returns the same.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		s.srv.Close()
	}
	<-s.done
	return s.err
}
