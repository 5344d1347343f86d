package runtime_test

import (
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/percore/percore/internal/pctest"
	"github.com/percore/percore/ring"
	percore "github.com/percore/percore/runtime"
)

// BenchmarkRecvMemory measures what an io_uring loop's receive buffers keep
// resident while 1,000 connections echo small (64 B) or large (16 KiB)
// requests, b.N round trips each: with the plain ring (512 buffers of 16
// KiB, a receive filling the pages it writes of a whole buffer), with
// incremental buffers (UringIncrementalBuffers: 32 of 64 KiB, each filled
// a receive after another) and with incremental buffers of the plain
// ring's bytes (BufferCount 2048: 128 of 64 KiB). Run with a
// -benchtime of at least 200x, so that the small requests cycle through
// every buffer of the rings: docs/performance.md, "io_uring features,
// part 6". The metrics: resident bytes of the buffers per connection, and
// in all.
func BenchmarkRecvMemory(b *testing.B) {
	pctest.NeedURing(b)
	s, err := ring.Probe()
	if err != nil || !s.HasFeature(ring.IncrementalBuffers) {
		b.Skip("the kernel lacks IOU_PBUF_RING_INC (6.12+)")
	}
	const conns = 1000
	for _, v := range []struct {
		name  string
		feats percore.UringFeatures
		count int
	}{
		{"plain", percore.DefaultUringFeatures, 0},
		{"incremental", percore.DefaultUringFeatures | percore.UringIncrementalBuffers, 0},
		{"incremental-full", percore.DefaultUringFeatures | percore.UringIncrementalBuffers, 2048},
	} {
		for _, size := range []int{64, 16 << 10} {
			b.Run(fmt.Sprintf("%s/%dB", v.name, size), func(b *testing.B) {
				f := v.feats
				rt := start(b, percore.Config{Backend: percore.IOURing, UringFeatures: &f, BufferCount: v.count}, echoHandler{})
				cs := make([]net.Conn, conns)
				for i := range cs {
					c, err := net.Dial("tcp", rt.Addr().String())
					if err != nil {
						b.Fatal(err)
					}
					defer c.Close()
					cs[i] = c
				}
				b.ResetTimer()
				var wg sync.WaitGroup
				errs := make(chan error, conns)
				for _, c := range cs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						p, got := make([]byte, size), make([]byte, size)
						for range b.N {
							if _, err := c.Write(p); err != nil {
								errs <- err
								return
							}
							if _, err := io.ReadFull(c, got); err != nil {
								errs <- err
								return
							}
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				close(errs)
				for err := range errs {
					b.Fatal(err)
				}
				l := rt.Loops()[0]
				var n int
				var ok bool
				done := make(chan struct{})
				if err := l.Post(func() { n, ok, err = percore.RecvResident(l); close(done) }); err != nil {
					b.Fatal(err)
				}
				<-done
				if !ok || err != nil {
					b.Fatalf("resident: %v, %v", ok, err)
				}
				b.ReportMetric(float64(n)/conns, "resident-B/conn")
				b.ReportMetric(float64(n)/1024, "resident-KiB")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// BenchmarkIncrementalHeld compares the two ways of holding a deferred
// receive's part of an incremental buffer (decision 0069): by reference
// (the buffer stays out of the ring until the part is delivered: refs)
// and copied out into a pooled buffer at once (copy). 50 connections
// echo 64 KiB messages under a 16 KiB turn budget, so that most of each
// message waits for a later turn. ns/op is one round of every
// connection's message, client included.
func BenchmarkIncrementalHeld(b *testing.B) {
	pctest.NeedURing(b)
	s, err := ring.Probe()
	if err != nil || !s.HasFeature(ring.IncrementalBuffers) {
		b.Skip("the kernel lacks IOU_PBUF_RING_INC (6.12+)")
	}
	const conns, size = 50, 64 << 10
	for _, copyHeld := range []bool{false, true} {
		name := map[bool]string{false: "refs", true: "copy"}[copyHeld]
		b.Run(name, func(b *testing.B) {
			f := percore.DefaultUringFeatures | percore.UringIncrementalBuffers
			rt := start(b, percore.Config{Backend: percore.IOURing, UringFeatures: &f, TurnBudget: 16 << 10}, echoHandler{})
			l := rt.Loops()[0]
			if copyHeld {
				done := make(chan bool)
				if err := l.Post(func() { done <- percore.CopyHeldParts(l) }); err != nil || !<-done {
					b.Fatal("cannot switch the loop to copying held parts")
				}
			}
			cs := make([]net.Conn, conns)
			for i := range cs {
				c, err := net.Dial("tcp", rt.Addr().String())
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				cs[i] = c
			}
			before, cpu0 := rt.Stats(), loopCPU(b, l)
			b.SetBytes(conns * size)
			b.ResetTimer()
			var wg sync.WaitGroup
			errs := make(chan error, conns)
			for _, c := range cs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					p := make([]byte, size)
					for range b.N {
						if _, err := roundTrip(c, p); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			after, cpu1 := rt.Stats(), loopCPU(b, l)
			b.ReportMetric(float64(after.Deferrals-before.Deferrals)/float64(b.N*conns), "deferrals/msg")
			b.ReportMetric(float64(cpu1-cpu0)/float64(b.N*conns), "loop-cpu-ns/msg")
		})
	}
}

// loopCPU returns the CPU time l's thread has used (getrusage of the
// thread, asked on it: a loop's goroutine keeps its thread).
func loopCPU(b *testing.B, l *percore.Loop) time.Duration {
	var ru unix.Rusage
	var err error
	done := make(chan struct{})
	if perr := l.Post(func() { err = unix.Getrusage(unix.RUSAGE_THREAD, &ru); close(done) }); perr != nil {
		b.Fatal(perr)
	}
	<-done
	if err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
