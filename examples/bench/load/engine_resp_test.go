//go:build linux

package main

import (
	"bufio"
	"net"
	"sync"
	"testing"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame/resp"
)

// respModel is a small Redis (GET and SET) for the RESP engine's tests,
// on goroutines: the engine's replies come from a server nobody shares
// code with. With swap, it answers the GETs of two different keys
// crosswise once per connection, a reply out of step the engine must catch.
func respModel(swap bool) func(net.Conn) {
	var mu sync.Mutex
	keys := map[string][]byte{}
	return func(c net.Conn) {
		r := bufio.NewReader(c)
		w := bufio.NewWriter(c)
		var buf []byte
		var held []byte // a GET reply held back to swap
		var heldKey string
		swapped := false
		for {
			chunk := make([]byte, 4096)
			n, err := r.Read(chunk)
			if err != nil {
				return
			}
			buf = append(buf, chunk[:n]...)
			for {
				args, used, err := resp.Parse(nil, buf, resp.Limits{})
				if err != nil {
					return
				}
				if used == 0 {
					break
				}
				var reply []byte
				mu.Lock()
				switch string(args[0]) {
				case "SET":
					keys[string(args[1])] = append([]byte(nil), args[2]...)
					reply = []byte("+OK\r\n")
				case "GET":
					if v, ok := keys[string(args[1])]; ok {
						reply = resp.AppendBulk(nil, v)
					} else {
						reply = []byte("$-1\r\n")
					}
				}
				mu.Unlock()
				buf = buf[used:]
				if swap && !swapped && string(args[0]) == "GET" && reply[0] == '$' && reply[1] != '-' {
					if held == nil {
						held, heldKey = reply, string(args[1])
						continue
					}
					if string(args[1]) != heldKey {
						w.Write(reply)
						w.Write(held)
						held, swapped = nil, true
						continue
					}
				}
				if held != nil {
					w.Write(held)
					held = nil
				}
				w.Write(reply)
			}
			if w.Flush() != nil {
				return
			}
		}
	}
}

// TestRespEngine: the RESP engine runs GET/SET mixes with pipelining on
// both backends, every reply verified: no error, no mismatch, against an
// honest server.
func TestRespEngine(t *testing.T) {
	srv := pctest.Serve(t, respModel(false))
	for _, tc := range []struct {
		name string
		eng  respEngine
	}{{"io_uring", respEngine{}}, {"epoll", respEngine{backend: percore.Epoll}}} {
		t.Run(tc.name, func(t *testing.T) {
			eng := tc.eng
			eng.opts = respOptions{getPercent: 60, keys: 50}
			wl := Workload{Addr: srv.Addr(), Conns: 4, Bytes: 40, Pipeline: 8}
			rec := runEngine(t, eng, wl, func(tot Totals) bool { return tot.Requests >= 4000 })
			if tot := rec.Totals(); tot.Errors != 0 || tot.Mismatches != 0 {
				t.Fatalf("against an honest server: %+v", tot)
			}
		})
	}
}

// TestRespEngineCatchesSwaps: two GET replies answered crosswise are a
// mismatch.
func TestRespEngineCatchesSwaps(t *testing.T) {
	srv := pctest.Serve(t, respModel(true))
	eng := respEngine{opts: respOptions{getPercent: 50, keys: 20}}
	wl := Workload{Addr: srv.Addr(), Conns: 2, Bytes: 16, Pipeline: 16}
	rec := runEngine(t, eng, wl, func(tot Totals) bool { return tot.Mismatches >= 1 })
	if rec.Totals().Mismatches == 0 {
		t.Fatal("no mismatch counted")
	}
}
