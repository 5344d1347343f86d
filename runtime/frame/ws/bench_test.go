package ws_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/percore/percore/runtime/frame/ws"
)

var sizes = []int{64, 1 << 10, 64 << 10, 1 << 20}

func sizeName(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// BenchmarkDecode: a server's decoder over a masked binary frame: the
// header, the word-at-a-time unmasking in place (the input is unmasked and
// masked again on alternate iterations: the same work), no copy.
func BenchmarkDecode(b *testing.B) {
	for _, n := range sizes {
		b.Run(sizeName(n), func(b *testing.B) {
			in := raw(0x82, true, make([]byte, n))
			var d ws.Decoder
			d.Limits.MaxMessage = -1
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				if _, f, err := d.Next(in); err != nil || !f.Last {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkConnDecode: a server Conn's Next over a masked binary message
// in one frame, what the gateway runs for each message it receives: the
// Conn's own checks around the decoder, the header, the unmasking in place
// (as BenchmarkDecode), the message returned as a slice of the input.
func BenchmarkConnDecode(b *testing.B) {
	for _, n := range sizes {
		b.Run(sizeName(n), func(b *testing.B) {
			in := raw(0x82, true, make([]byte, n))
			var c ws.Conn
			c.Init(ws.NewPool(ws.Config{Limits: ws.Limits{MaxMessage: -1}}), ws.Server, nil)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			for b.Loop() {
				if k, ev, p, err := c.Next(in); err != nil || ev != ws.Binary || k != len(in) || len(p) != n {
					b.Fatal(k, ev, len(p), err)
				}
			}
		})
	}
}

// BenchmarkDecodeText: a client's decoder over an unmasked text frame:
// the header and the streamed UTF-8 validation (mostly ASCII, some
// multi-byte code points).
func BenchmarkDecodeText(b *testing.B) {
	for _, n := range sizes {
		b.Run(sizeName(n), func(b *testing.B) {
			p := []byte(strings.Repeat("{\"user\":\"Zoë\",\"msg\":\"hello\"}", n/29+1)[:n])
			for !validPrefix(p) {
				p = p[:len(p)-1]
			}
			in := raw(0x81, false, p)
			d := ws.Decoder{Role: ws.Client, Limits: ws.Limits{MaxMessage: -1}}
			b.SetBytes(int64(len(p)))
			b.ReportAllocs()
			for b.Loop() {
				if _, f, err := d.Next(in); err != nil || !f.Last {
					b.Fatal(err)
				}
			}
		})
	}
}

func validPrefix(p []byte) bool { return strings.ToValidUTF8(string(p), "\x00") == string(p) }

// BenchmarkEncode: a server's frame (header and payload) written into a
// room the caller holds, as a connection's reserved outbound buffer.
func BenchmarkEncode(b *testing.B) {
	for _, masked := range []bool{false, true} {
		for _, n := range sizes {
			name := "server/" + sizeName(n)
			if masked {
				name = "client/" + sizeName(n)
			}
			b.Run(name, func(b *testing.B) {
				p := make([]byte, n)
				room := make([]byte, ws.FrameLen(n, masked))
				b.SetBytes(int64(n))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := ws.PutFrame(room, ws.OpBinary, p, masked); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func jsonMessage(n int) []byte {
	var s strings.Builder
	for i := 0; s.Len() < n; i++ {
		fmt.Fprintf(&s, "{\"id\":%d,\"topic\":\"prices\",\"bid\":%d.%02d,\"ask\":%d.%02d}", i, 100+i%7, i%100, 101+i%5, (i*7)%100)
	}
	return []byte(s.String()[:n])
}

// BenchmarkDeflate: a server's compressed message written into a room,
// without context takeover (the Pool's shared compressor, reset for each
// message) and with it (the connection's own), and read back by a client.
func BenchmarkDeflate(b *testing.B) {
	for _, takeover := range []bool{false, true} {
		for _, n := range []int{256, 4 << 10, 64 << 10} {
			b.Run(fmt.Sprintf("takeover=%v/%s", takeover, sizeName(n)), func(b *testing.B) {
				d := ws.Deflate{Enabled: true, WriteContextTakeover: takeover, ReadContextTakeover: takeover}
				s, c := pair(b, ws.Config{Deflate: d}, ws.Config{Deflate: d})
				p := jsonMessage(n)
				room := make([]byte, s.MaxLen(n))
				b.SetBytes(int64(n))
				b.ReportAllocs()
				var wire int
				for b.Loop() {
					k, err := s.PutMessage(room, ws.OpText, p)
					if err != nil {
						b.Fatal(err)
					}
					wire += k
					if _, ev, _, err := c.Next(room[:k]); err != nil || ev != ws.Text {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(wire)/float64(b.N)/float64(n), "wire/byte")
			})
		}
	}
}

// BenchmarkFanOut: one Prepared message written for 1000 connections
// (the copy of its shared encoding into each one's room).
func BenchmarkFanOut(b *testing.B) {
	for _, compress := range []bool{false, true} {
		b.Run(fmt.Sprintf("deflate=%v", compress), func(b *testing.B) {
			cfg := ws.Config{Deflate: ws.Deflate{Enabled: compress}}
			pool := ws.NewPool(cfg)
			conns := make([]*ws.Conn, 1000)
			for i := range conns {
				conns[i], _ = pair(b, cfg, cfg)
			}
			p := jsonMessage(512)
			room := make([]byte, 2048)
			b.ReportAllocs()
			for b.Loop() {
				pm, err := pool.Prepare(ws.OpText, p)
				if err != nil {
					b.Fatal(err)
				}
				for _, c := range conns {
					if _, err := c.PutPrepared(room[:c.PreparedLen(pm)], pm); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(conns)), "ns/delivery")
		})
	}
}

// BenchmarkConnMemory: the heap each connection holds once it has
// received and sent a compressed message and gone idle, for 2000
// connections of each kind (B/conn; unsafe.Sizeof(ws.Conn{}) included).
func BenchmarkConnMemory(b *testing.B) {
	kinds := []struct {
		name string
		d    ws.Deflate
	}{
		{"plain", ws.Deflate{}},
		{"deflate", ws.Deflate{Enabled: true}},
		{"deflate-read-takeover", ws.Deflate{Enabled: true, ReadContextTakeover: true}},
		{"deflate-read-takeover-10bits", ws.Deflate{Enabled: true, ReadContextTakeover: true, ReadWindowBits: 10}},
		{"deflate-write-takeover", ws.Deflate{Enabled: true, WriteContextTakeover: true}},
		{"deflate-both-takeover", ws.Deflate{Enabled: true, WriteContextTakeover: true, ReadContextTakeover: true}},
	}
	const n = 2000
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			cfg := ws.Config{Deflate: k.d}
			// The client compresses each message on its own, so that one
			// message serves every connection.
			ccfg := ws.Config{Deflate: ws.Deflate{Enabled: true, ReadContextTakeover: true}}
			msg := jsonMessage(1 << 10)
			var perConn float64
			for b.Loop() {
				pool := ws.NewPool(cfg) // one loop's pool, shared
				hs := make([]ws.Handshake, n)
				for i := range hs {
					hs[i] = handshakeFor(b, cfg, ccfg)
				}
				_, cl := pair(b, cfg, ccfg)
				one, _ := cl.AppendMessage(nil, ws.OpText, msg)
				wires := make([][]byte, n)
				for i := range wires {
					wires[i] = append([]byte(nil), one...)
				}
				// Warm the pool (its compressor, decompressor, buffers).
				var warm ws.Conn
				warm.Init(pool, ws.Server, &hs[0])
				warm.Next(append([]byte(nil), one...))
				warm.PutMessage(make([]byte, 4096), ws.OpText, msg)
				warm.Next(nil)
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				conns := make([]ws.Conn, n)
				room := make([]byte, 4096)
				for i := range conns {
					conns[i].Init(pool, ws.Server, &hs[i])
					if _, _, _, err := conns[i].Next(wires[i]); err != nil {
						b.Fatal(err)
					}
					if _, err := conns[i].PutMessage(room, ws.OpText, msg); err != nil {
						b.Fatal(err)
					}
					conns[i].Next(nil) // idle: gives back the message buffer
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perConn = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / n
				runtime.KeepAlive(conns)
				runtime.KeepAlive(pool)
				runtime.KeepAlive(cl)
				runtime.KeepAlive(wires)
				runtime.KeepAlive(hs)
			}
			b.ReportMetric(perConn, "B/conn")
		})
	}
}

// handshakeFor returns what a server configured by scfg agrees with a
// client configured by ccfg.
func handshakeFor(b *testing.B, scfg, ccfg ws.Config) ws.Handshake {
	offer := ""
	if ccfg.Deflate.Enabled {
		key := ws.NewKey()
		req := string(ws.AppendRequest(nil, "h", "/", &key, &ccfg, ""))
		for _, l := range strings.Split(req, "\r\n") {
			if v, ok := strings.CutPrefix(l, "Sec-WebSocket-Extensions: "); ok {
				offer = v
			}
		}
	}
	req := goodRequest + "Sec-WebSocket-Extensions: " + offer + "\r\n\r\n"
	r := parseReqB(b, req)
	hs, err := ws.Accept(r, &scfg)
	if err != nil {
		b.Fatal(err)
	}
	return hs
}
