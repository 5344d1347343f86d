//go:build linux

// Command trickle is issue 23's trickle: one client sends one large RESP
// command (-args one-byte arguments, the name included: "*140000\r\n" and
// "$1\r\nx\r\n" 140,000 times, 980 KB) in -seg-byte writes, one write per
// segment with TCP_NODELAY, a segment every -gap (paced by spinning; 0: as
// fast as the writes go), while a second client sends
// a PING every -ping-every (open loop: each PING's latency counts from the
// time it was due, so a stalled server cannot hide behind a waiting
// client). It sends -warmup commands first, unmeasured (a fresh server's
// first big command also pays for its heap's growth), then -n measured
// ones, one after the other, and reports the server's CPU time per
// measured command (the sum of its threads' on-CPU time from
// /proc/PID/task/*/schedstat), the wall time per command, and the PINGs'
// latency percentiles over the measured commands, on one line:
//
//	trickle -addr 127.0.0.1:6380 -pid $(pidof kv) -seg 7 -gap 5us
//	bytes=980009 seg=7 gap_us=5 writes=140002 n=5 wall_ms=612.3 server_cpu_ms=301.2 pings=3012 ping_p50_us=80 ping_p99_us=950 ping_max_us=2100 reply=-ERR
//
// The command's name is "x", which no server knows: the server parses all
// of it and answers an error, so the figure is the cost of reading the
// command. scripts/bench-trickle.sh runs it against examples/kv and
// redis-server side by side.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6380", "the server's address")
	pid := flag.Int("pid", 0, "the server's process id, for its CPU time (0: not measured)")
	args := flag.Int("args", 140000, "arguments of the command, its name included, one byte each")
	seg := flag.Int("seg", 7, "bytes per write")
	every := flag.Duration("ping-every", time.Millisecond, "a PING from a second client this often (0: none)")
	warmup := flag.Int("warmup", 1, "commands sent first, not measured")
	n := flag.Int("n", 5, "commands measured, one after the other")
	gap := flag.Duration("gap", 0, "a segment every this long, paced by spinning (0: as fast as the writes go)")
	timeout := flag.Duration("timeout", 60*time.Second, "give up after this long")
	flag.Parse()
	if err := run(os.Stdout, *addr, *pid, *args, *seg, *warmup, *n, *gap, *every, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "trickle:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, addr string, pid, args, seg, warmup, n int, gap, every, timeout time.Duration) error {
	if args < 1 || seg < 1 || n < 1 || warmup < 0 {
		return fmt.Errorf("-args %d, -seg %d, -n %d: each at least 1; -warmup %d: at least 0", args, seg, n, warmup)
	}
	// The writer and the pinger each on a thread of its own, so that the
	// pinger's wake-ups do not wait for the writer's time slice.
	runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), 2))
	cmd := fmt.Appendf(nil, "*%d\r\n", args)
	for range args {
		cmd = append(cmd, "$1\r\nx\r\n"...)
	}
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.(*net.TCPConn).SetNoDelay(true)
	deadline := time.Now().Add(timeout)
	c.SetDeadline(deadline)
	cr := bufio.NewReader(c)
	writes := 0
	var reply string
	send := func() error {
		writes = 0
		due := time.Now()
		for i := 0; i < len(cmd); i += seg {
			if gap > 0 {
				for time.Now().Before(due) {
					// Spin, but let the pinger's thread have the CPU
					// whenever it is ready to run.
					syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
				}
				due = due.Add(gap)
			}
			if _, err := c.Write(cmd[i:min(i+seg, len(cmd))]); err != nil {
				return fmt.Errorf("write at byte %d: %w", i, err)
			}
			writes++
		}
		if reply, err = cr.ReadString('\n'); err != nil {
			return fmt.Errorf("the command's reply: %w", err)
		}
		return nil
	}
	runtime.LockOSThread()
	for range warmup {
		if err := send(); err != nil {
			return err
		}
	}

	var (
		lat  []time.Duration
		perr error
		wg   sync.WaitGroup
	)
	stop := make(chan struct{})
	if every > 0 {
		p, err := dialBlocking(addr, timeout)
		if err != nil {
			return err
		}
		defer p.close()
		if err := p.ping(); err != nil { // connected and served before the window opens
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			lat, perr = pinger(p, every, stop)
		}()
	}

	cpu0, err := serverCPU(pid)
	if err != nil {
		return err
	}
	start := time.Now()
	for range n {
		if err := send(); err != nil {
			return err
		}
	}
	wall := time.Since(start) / time.Duration(n)
	cpu1, err := serverCPU(pid)
	if err != nil {
		return err
	}
	close(stop)
	wg.Wait()
	if perr != nil {
		return fmt.Errorf("ping: %w", perr)
	}
	kind := strings.TrimSpace(reply)
	if i := strings.IndexByte(kind, ' '); i > 0 {
		kind = kind[:i]
	}
	fmt.Fprintf(w, "bytes=%d seg=%d gap_us=%d writes=%d n=%d wall_ms=%.1f", len(cmd), seg, gap.Microseconds(), writes, n, ms(wall))
	if pid > 0 {
		fmt.Fprintf(w, " server_cpu_ms=%.1f", float64(cpu1-cpu0)/1e6/float64(n))
	}
	if every > 0 {
		slices.Sort(lat)
		q := func(f float64) int64 {
			if len(lat) == 0 {
				return 0
			}
			return lat[min(len(lat)-1, int(f*float64(len(lat))))].Microseconds()
		}
		fmt.Fprintf(w, " pings=%d ping_p50_us=%d ping_p99_us=%d ping_max_us=%d", len(lat), q(0.5), q(0.99), q(1))
	}
	fmt.Fprintf(w, " reply=%s\n", kind)
	return nil
}

// pinger sends a PING each time one is due, every, and records each
// latency from the time it was due, until stop.
func pinger(p *blockingConn, every time.Duration, stop <-chan struct{}) ([]time.Duration, error) {
	var lat []time.Duration
	due := time.Now()
	for {
		select {
		case <-stop:
			return lat, nil
		default:
		}
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		if err := p.ping(); err != nil {
			return lat, err
		}
		lat = append(lat, time.Since(due))
		due = due.Add(every)
	}
}

// blockingConn is the pinger's connection: a blocking socket read and
// written with plain system calls on the pinger's own thread, so that a
// PONG wakes that thread at once. Through Go's network poller it would
// wait for a thread to poll, which, while the writer spins on the other
// one, can be sysmon's poll up to 10 ms later: the client's delay, not the
// server's.
type blockingConn struct {
	fd  int
	buf [64]byte
}

func dialBlocking(addr string, timeout time.Duration) (*blockingConn, error) {
	ta, err := net.ResolveTCPAddr("tcp4", addr)
	if err != nil {
		return nil, err
	}
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	c := &blockingConn{fd: fd}
	sa := &syscall.SockaddrInet4{Port: ta.Port}
	copy(sa.Addr[:], ta.IP.To4())
	tv := syscall.NsecToTimeval(timeout.Nanoseconds())
	for _, opt := range []int{syscall.SO_RCVTIMEO, syscall.SO_SNDTIMEO} {
		if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, opt, &tv); err != nil {
			c.close()
			return nil, err
		}
	}
	if err := syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1); err != nil {
		c.close()
		return nil, err
	}
	if err := syscall.Connect(fd, sa); err != nil {
		c.close()
		return nil, fmt.Errorf("connect %s: %w", addr, err)
	}
	return c, nil
}

func (c *blockingConn) close() { syscall.Close(c.fd) }

var pingCmd = []byte("*1\r\n$4\r\nPING\r\n")

// ping sends a PING and reads its +PONG.
func (c *blockingConn) ping() error {
	if _, err := syscall.Write(c.fd, pingCmd); err != nil {
		return err
	}
	got := 0
	for got < len("+PONG\r\n") {
		n, err := syscall.Read(c.fd, c.buf[got:])
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		got += n
	}
	if string(c.buf[:got]) != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", c.buf[:got])
	}
	return nil
}

// serverCPU returns the time the process's threads have run, in ns: the
// first field of each /proc/PID/task/TID/schedstat (0 without a pid).
func serverCPU(pid int) (int64, error) {
	if pid <= 0 {
		return 0, nil
	}
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		return 0, fmt.Errorf("process %d: no /proc/%d/task/*/schedstat (%v)", pid, pid, err)
	}
	var sum int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that ended
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q", t, b)
		}
		sum += n
	}
	return sum, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
