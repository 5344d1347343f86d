package runtime_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// lineEcho answers every line with one byte.
type lineEcho struct{}

func (lineEcho) OnData(c *percore.Conn, data []byte) {
	if n := bytes.Count(data, []byte{'\n'}); n > 0 {
		c.Write(okBytes[:min(n, len(okBytes))])
		for n -= len(okBytes); n > 0; n -= len(okBytes) {
			c.Write(okBytes[:min(n, len(okBytes))])
		}
	}
}

var okBytes = bytes.Repeat([]byte{'k'}, 4096)

// BenchmarkPipelinedNeighbour measures a light client's ping-pong latency
// while another connection on the same loop pipelines 16 MB of 64-byte
// requests, with the per-turn budget on (64 KiB) and off, per backend. It
// reports the light client's p50 and p99 in microseconds.
func BenchmarkPipelinedNeighbour(b *testing.B) {
	const heavyBytes, lineLen = 16 << 20, 64
	for _, backend := range pctest.Backends {
		for _, budget := range []int{0, -1} {
			name := "budget-on"
			if budget < 0 {
				name = "budget-off"
			}
			b.Run(fmt.Sprintf("%v/%s", backend, name), func(b *testing.B) {
				rt := start(b, percore.Config{Backend: backend, TurnBudget: budget}, lineEcho{})
				line := append(bytes.Repeat([]byte("h"), lineLen-1), '\n')
				chunk := bytes.Repeat(line, 1024)
				var lat []time.Duration
				for b.Loop() {
					heavy, err := net.Dial("tcp", rt.Addr().String())
					if err != nil {
						b.Fatal(err)
					}
					light, err := net.Dial("tcp", rt.Addr().String())
					if err != nil {
						b.Fatal(err)
					}
					heavyDone := make(chan error, 2)
					go func() {
						for sent := 0; sent < heavyBytes; sent += len(chunk) {
							if _, err := heavy.Write(chunk); err != nil {
								heavyDone <- err
								return
							}
						}
						heavyDone <- nil
					}()
					go func() {
						_, err := io.CopyN(io.Discard, heavy, heavyBytes/lineLen)
						heavyDone <- err
					}()
					// Ping for as long as the heavy connection's replies
					// are still coming: only latencies next to the
					// pipeline count.
					one := make([]byte, 1)
					pending := 2
					for pending > 0 {
						select {
						case err := <-heavyDone:
							if err != nil {
								b.Fatal(err)
							}
							pending--
							continue
						default:
						}
						start := time.Now()
						if _, err := light.Write([]byte("ping\n")); err != nil {
							b.Fatal(err)
						}
						if _, err := io.ReadFull(light, one); err != nil {
							b.Fatal(err)
						}
						lat = append(lat, time.Since(start))
					}
					heavy.Close()
					light.Close()
				}
				if len(lat) == 0 {
					b.Fatal("no ping completed while the pipeline ran")
				}
				slices.Sort(lat)
				b.ReportMetric(float64(len(lat))/float64(b.N), "pings/op")
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "light-p50-us")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "light-p99-us")
			})
		}
	}
}
