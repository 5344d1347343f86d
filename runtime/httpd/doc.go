// Package httpd is an HTTP/1.1 server for percore: handlers that run
// inline on the loops and write their answers in place, a router with
// Go 1.22's http.ServeMux patterns, one door for blocking work (a bounded
// worker pool whose answers come back to the loop, in order), and an
// adapter that runs net/http handlers on that pool while the loops do
// every socket operation.
//
//	mux := httpd.NewMux()
//	mux.HandleFunc("GET /hello/{name}", func(w *httpd.Response, r *httpd.Request) {
//		w.AddHeader("Content-Type", "text/plain")
//		w.WriteString("hello, ")
//		w.Write(r.PathValue("name"))
//	})
//	srv := httpd.New(httpd.Config{}, mux)
//	rt, err := percore.New(percore.Config{Addr: ":8080"}, srv.Handler())
//	...
//	rt.Shutdown(ctx) // requests in flight are answered, with Connection: close
//	srv.Close()
//
// # The request path
//
// Requests are parsed in place by runtime/frame/http1 over frame.View
// (the input buffer is sized from Config.Limits). A Handler is called once
// the request's body has arrived (Request.Body, bounded by
// Config.MaxBodyBuffer); a StreamHandler is called at the head and then
// with each piece of the body as it arrives. The Response builds the
// status line, fields and body in the connection's outbound queue
// (Conn.Reserve and Commit): the answers to the requests of one read are
// committed together, once, when the read is done, and go out in one
// write at the end of the loop's turn. A body gets a
// Content-Length when it is whole by the end of the handler (or declared
// with Response.ContentLength), else it is sent chunked. The fast way to
// answer is a Head, a status and fields prepared once (NewHead: checked
// when it is made), and Response.Send with the whole body: one
// reservation, the head in one copy, the length known before the head
// is written (AddHeader checks each field per response, and a body written
// without a declared length is moved to insert its Content-Length). Keep-alive,
// pipelining, HEAD, Expect: 100-continue (granted for a routed request,
// refused with the final status and a close otherwise), the per-loop Date,
// the head timeout (408), the idle timeout, Upgrade (Response.Upgrade
// hands the connection to another protocol) and graceful shutdown are the
// server's: a request in flight when Shutdown begins is answered with
// Connection: close, and the off-loop work answering one (Server.Go,
// Adapt) sees its context cancelled as the shutdown begins (its cause
// ErrShuttingDown), so that it answers at once instead of holding the
// shutdown to its deadline. A request the codec rejects is answered with its
// status (400, 413, 414, 417, 431, 501, 505) and Connection: close, and the
// connection closes lingering (Conn.CloseLinger), so that a client still
// sending reads the answer instead of a reset. A handler that panics is
// answered 500 (logged, counted in Stats) and the loop goes on. None of
// this allocates per request: a handler that allocates nothing serves
// requests with no allocation at all (TestRouteAllocs).
//
// At a restart's hand-over (percore.Runtime.HandOver) an idle keep-alive
// connection moves to the new process as it is; an upgraded one moves when
// its UpgradeHandler's OnHandover gives its state, and the new process's
// Config.AdoptUpgraded makes the handler again from it (handover.go).
//
// # Answering later
//
// A handler must not block. Three ways to answer later, from fastest:
//
//   - Response.Hold, and End from a callback on the loop: a loop timer,
//     or the reply of a TCP backend through the loop's own pool
//     (runtime/pool/upstream's Exchange: no goroutine at all).
//   - Server.Go: work on the bounded worker pool with a context, its
//     answer written back on the loop. This is the door for blocking
//     libraries (a database driver, go-redis, net/http's client).
//   - Adapt: a whole net/http handler on the worker pool.
//
// In all three the connection's later (pipelined) requests wait and are
// answered after it, in order; Conn.BeginRequest and EndRequest are done
// for you, so that a graceful shutdown waits for the answer and never for
// a forgotten EndRequest; Config.HandlerTimeout bounds the wait (503 and
// a close past it); past Config.Workers busy workers and Config.MaxQueue
// waiting jobs a request is answered 503 at once (Stats.Rejected); and
// the work's context is cancelled when the client goes away or a graceful
// shutdown begins.
//
// # Threads
//
// A Server is safe for concurrent use; Handler, Stats and Close may be
// called from any goroutine. Handlers, the Request and the Response belong
// to the connection's loop: they are valid during the handler's call (for
// a held response, until End), and what work elsewhere needs must be
// copied out of them first.
//
// # Caveats
//
// The Request's slices point into the connection's input: they are valid
// during the handler's call only. Request.Trailer is valid during the
// handler's call, not after Hold.
//
// Offloaded work (Server.Go, Adapt) needs a P that no loop holds: run with
// GOMAXPROCS above the number of loops (say one loop per CPU but one, or
// GOMAXPROCS one more than the loops on the same CPUs). A loop's thread is
// locked and holds its P while it sleeps in the kernel; with no spare P,
// a worker made runnable by the loop waits until Go's sysmon retakes that
// P, from 20 µs up to 10 ms, and offloaded requests crawl
// (docs/performance.md measures it).
//
// Close waits for the workers' jobs to return: work that ignores its
// context delays it. A Server serves the loops of one runtime.
//
// The Mux resolves the pattern sets ServeMux would reject as conflicting
// by its own order (literal, then {name}, then {name...}), and has no host
// patterns.
package httpd
