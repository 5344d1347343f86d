//go:build linux

// Command walload is the load generator of scripts/bench-wal.sh: -clients
// connections to a WAL server (examples/wal, or examples/bench/baseline/walstd),
// each sending one record of -size bytes at a time and waiting for its
// acknowledgement (a closed loop: the acknowledgement latency is the
// round trip), for -duration after -warmup. It prints records
// acknowledged per second and the latency percentiles over the window:
//
//	clients=256 records=123456 rate=61728/s p50=3900us p99=6100us errors=0
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/percore/percore/internal/hist"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7400", "the server")
	clients := flag.Int("clients", 16, "connections, each with one record in flight")
	size := flag.Int("size", 100, "payload bytes per record")
	warmup := flag.Duration("warmup", time.Second, "load before the window")
	duration := flag.Duration("duration", 5*time.Second, "the measured window")
	flag.Parse()

	var measuring atomic.Bool
	var stopped atomic.Bool
	var errs atomic.Uint64
	hs := make([]hist.Histogram, *clients)
	var wg sync.WaitGroup
	for i := range *clients {
		c, err := net.DialTimeout("tcp", *addr, 5*time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, "walload:", err)
			os.Exit(1)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			frame := binary.BigEndian.AppendUint32(nil, uint32(*size))
			frame = append(frame, make([]byte, *size)...)
			ack := make([]byte, 8)
			var last uint64
			for !stopped.Load() {
				t := time.Now()
				if _, err := c.Write(frame); err != nil {
					errs.Add(1)
					return
				}
				if _, err := io.ReadFull(c, ack); err != nil {
					errs.Add(1)
					return
				}
				if lsn := binary.BigEndian.Uint64(ack); last != 0 && lsn <= last {
					errs.Add(1) // out of order
				} else {
					last = lsn
				}
				if measuring.Load() {
					hs[i].Record(int64(time.Since(t)))
				}
			}
		}()
	}
	time.Sleep(*warmup)
	measuring.Store(true)
	start := time.Now()
	time.Sleep(*duration)
	measuring.Store(false)
	elapsed := time.Since(start)
	stopped.Store(true)
	wg.Wait()
	var h hist.Histogram
	for i := range hs {
		h.Merge(&hs[i])
	}
	fmt.Printf("clients=%d records=%d rate=%.0f/s p50=%dus p99=%dus errors=%d\n", *clients, h.Count(),
		float64(h.Count())/elapsed.Seconds(), h.Quantile(0.5)/1000, h.Quantile(0.99)/1000, errs.Load())
}
