//go:build linux

// Command http is an HTTP/1.1 server on runtime/httpd with the TechEmpower
// endpoints (go run ./examples/http -addr 127.0.0.1:8080): GET or HEAD
// /plaintext and /json (serialized per request); POST or PUT /echo (the
// body streamed back as it arrives, with its Content-Length or chunked,
// held back by the outbound cap); GET /sleep?ms=N ("slept" after N ms, at
// most 10 s, from a loop timer). httpd does keep-alive, pipelining,
// limits, 408, 100-continue, error answers with a lingering close, and
// Connection: close in SIGINT/SIGTERM's graceful shutdown.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/percore/percore/examples/internal/serverflag"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame/http1"
	"github.com/percore/percore/runtime/httpd"
	"github.com/percore/percore/runtime/metrics"
)

// config is what the flags set: the runtime's, the server's and TLS's.
type config struct {
	rt  percore.Config
	srv httpd.Config
	tls serverflag.TLSFlags
}

func main() {
	var cfg config
	sf := serverflag.Register(flag.CommandLine, "127.0.0.1:8080")
	tf := serverflag.RegisterTLS(flag.CommandLine)
	flag.DurationVar(&cfg.srv.IdleTimeout, "idle-timeout", 75*time.Second, "close a connection idle this long (negative: never)")
	flag.DurationVar(&cfg.srv.HeadTimeout, "head-timeout", 10*time.Second, "answer 408 to a head not whole this long after its first byte")
	flag.Int64Var(&cfg.srv.Limits.MaxBody, "max-body", http1.DefaultMaxBody, "longest request body in bytes (413 past it; -1: no limit)")
	flag.Parse()
	cfg.rt.Addr, cfg.tls = sf.Addr, *tf
	sf.Apply(&cfg.rt)
	cfg.rt.Logger, cfg.srv.Logger = slog.Default(), slog.Default()
	r, err := start(cfg)
	if err == nil {
		var ms *metrics.Server // nil without -metrics
		if ms, err = sf.ServeMetrics(r.rt); ms != nil {
			defer ms.Close()
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "http:", err)
		os.Exit(1)
	}
	// Signals are caught before the line that says it listens: whoever reads
	// it may stop the server at once.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	fmt.Printf("http: %d loops listening on %s (%s)\n", len(r.rt.Loops()), r.rt.Addr(), r.rt.Loops()[0].Backend())
	<-ctx.Done()
	stop()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r.rt.Shutdown(sctx) // answers requests in flight (Connection: close) until sctx is done
	r.close()
}

// The heads of the answers, their fields checked once, here, and each
// written with one copy.
var (
	plainHead = httpd.NewHead(200, "Content-Type", "text/plain")
	jsonHead  = httpd.NewHead(200, "Content-Type", "application/json")
	octetHead = httpd.NewHead(200, "Content-Type", "application/octet-stream")
)

// routes are the endpoints.
func routes() *httpd.Mux {
	m := httpd.NewMux()
	m.HandleFunc("GET /plaintext", func(w *httpd.Response, r *httpd.Request) { w.SendString(plainHead, "Hello, World!") })
	m.HandleFunc("GET /json", func(w *httpd.Response, r *httpd.Request) {
		var buf [64]byte
		w.Send(jsonHead, appendJSONMessage(buf[:0], "Hello, World!"))
	})
	m.Handle("POST /echo", echo{})
	m.Handle("PUT /echo", echo{})
	m.HandleFunc("GET /sleep", func(w *httpd.Response, r *httpd.Request) {
		v, _ := r.Query("ms")
		ms, _ := strconv.Atoi(string(v))
		w.Hold() // answered by the timer; the loop serves on meanwhile
		r.Conn().Loop().AfterFunc(min(time.Duration(max(ms, 0))*time.Millisecond, 10*time.Second), func() {
			w.SendString(plainHead, "slept\n")
			w.End()
		})
	})
	return m
}

// echo streams the request body back as it arrives (httpd.StreamHandler).
type echo struct{}

func (echo) ServeHTTP(w *httpd.Response, r *httpd.Request) {
	w.WriteHead(octetHead)
	if n := r.ContentLength(); n >= 0 {
		w.ContentLength(n) // else chunked, as the upload was
	}
}
func (echo) OnBody(w *httpd.Response, _ *httpd.Request, p []byte) { w.Write(p) }
func (echo) OnEnd(*httpd.Response, *httpd.Request)                {}

// appendJSONMessage serializes {"message":msg} as encoding/json would.
func appendJSONMessage(dst []byte, msg string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, `{"message":"`...)
	for i := 0; i < len(msg); i++ {
		switch c := msg[i]; {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n' || c == '\r' || c == '\t':
			dst = append(dst, '\\', "nrt"[strings.IndexByte("\n\r\t", c)])
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, `"}`...)
}

// running is a started server.
type running struct {
	srv *httpd.Server
	rt  *percore.Runtime
}

func start(cfg config) (*running, error) {
	srv := httpd.New(cfg.srv, routes())
	if err := cfg.tls.Apply(&cfg.rt, "http/1.1"); err != nil {
		return nil, err
	}
	rt, err := percore.New(cfg.rt, srv.Handler())
	return &running{srv, rt}, err
}

func (r *running) close() { r.rt.Close(); r.srv.Close() }
