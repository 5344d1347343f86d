//go:build linux

// Command trickle is issue 23's trickle: one client sends one large RESP
// command (-args one-byte arguments, the name included: "*140000\r\n" and
// "$1\r\nx\r\n" 140,000 times, 980 KB) in -seg-byte writes, one write per
// segment with TCP_NODELAY, as fast as it can, while a second client sends
// a PING every -ping-every (open loop: each PING's latency counts from the
// time it was due, so a stalled server cannot hide behind a waiting
// client). It sends -warmup commands first, unmeasured (a fresh server's
// first big command also pays for its heap's growth), then -n measured
// ones, one after the other, and reports the server's CPU time per
// measured command (the sum of its threads' on-CPU time from
// /proc/PID/task/*/schedstat), the wall time per command, and the PINGs'
// latency percentiles over the measured commands, on one line:
//
//	trickle -addr 127.0.0.1:6380 -pid $(pidof kv) -seg 7
//	bytes=980009 seg=7 writes=140002 n=5 wall_ms=612.3 server_cpu_ms=301.2 pings=3012 ping_p50_us=80 ping_p99_us=950 ping_max_us=2100 reply=-ERR
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
	timeout := flag.Duration("timeout", 60*time.Second, "give up after this long")
	flag.Parse()
	if err := run(os.Stdout, *addr, *pid, *args, *seg, *warmup, *n, *every, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "trickle:", err)
		os.Exit(1)
	}
}

func run(w io.Writer, addr string, pid, args, seg, warmup, n int, every, timeout time.Duration) error {
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
		for i := 0; i < len(cmd); i += seg {
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
		p, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return err
		}
		defer p.Close()
		p.(*net.TCPConn).SetNoDelay(true)
		p.SetDeadline(deadline)
		pr := bufio.NewReader(p)
		if err := ping(p, pr); err != nil { // connected and served before the window opens
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			lat, perr = pinger(p, pr, every, stop)
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
	fmt.Fprintf(w, "bytes=%d seg=%d writes=%d n=%d wall_ms=%.1f", len(cmd), seg, writes, n, ms(wall))
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
func pinger(p net.Conn, pr *bufio.Reader, every time.Duration, stop <-chan struct{}) ([]time.Duration, error) {
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
		if err := ping(p, pr); err != nil {
			return lat, err
		}
		lat = append(lat, time.Since(due))
		due = due.Add(every)
	}
}

func ping(p net.Conn, pr *bufio.Reader) error {
	if _, err := p.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := pr.ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
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
