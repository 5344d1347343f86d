//go:build linux

// Command restart measures examples/multi's restart (issue 30,
// docs/performance.md#restart-hand-over). Two modes:
//
//	-mode idle       -conns N: N idle kept-alive TCP connections, one SIGHUP;
//	                 reports how long the hand-over took (the old process's
//	                 log), when the old process exited and when every
//	                 connection had been answered by the new one (both from
//	                 the new process's ready line), and the processes' memory
//	-mode keepalive  -clients C -restarts R: C clients that keep each
//	                 connection for -per echo requests and reconnect, while
//	                 the server gets SIGHUP every -every; reports the
//	                 requests and the failed ones
//
//	go build -o /tmp/multi ./examples/multi
//	go build -o /tmp/restart ./restart
//	taskset -c 1 /tmp/restart -server /tmp/multi -mode idle -conns 18000
//	taskset -c 1 /tmp/restart -server /tmp/multi -mode keepalive -restarts 20
//
// The server runs on -server-cpus (taskset), the clients where this runs.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	server := flag.String("server", "/tmp/multi", "the examples/multi binary")
	mode := flag.String("mode", "idle", "idle or keepalive")
	backend := flag.String("backend", "auto", "the server's -backend")
	conns := flag.Int("conns", 18000, "idle: connections")
	clients := flag.Int("clients", 20, "keepalive: clients")
	per := flag.Int("per", 5, "keepalive: requests per connection")
	restarts := flag.Int("restarts", 20, "keepalive: restarts")
	every := flag.Duration("every", time.Second, "keepalive: time between restarts")
	cpus := flag.String("server-cpus", "0", "the server's CPUs (taskset -c; empty: this process's)")
	flag.Parse()
	raiseNofile()
	dir, err := os.MkdirTemp("", "pcrestart")
	check(err)
	defer os.RemoveAll(dir)
	s := start(*server, *backend, *cpus, dir)
	defer s.stop()
	switch *mode {
	case "idle":
		idle(s, *conns)
	case "keepalive":
		keepalive(s, *clients, *per, *restarts, *every)
	default:
		check(fmt.Errorf("mode %q", *mode))
	}
}

// srv is the server: its processes' ready lines and its log.
type srv struct {
	first   *exec.Cmd
	readies chan ready
	log     string
	pids    []int
	r0      ready // the first process's ready line
}

type ready struct {
	pid  int
	addr string
	at   time.Time
}

func start(bin, backend, cpus, dir string) *srv {
	s := &srv{readies: make(chan ready, 64), log: filepath.Join(dir, "stderr")}
	logf, err := os.Create(s.log)
	check(err)
	out, w, err := os.Pipe()
	check(err)
	args := []string{bin, "-addr", "127.0.0.1:0", "-udp", "", "-unix", "", "-backend", backend, "-cores", "0", "-grace", "10s"}
	if cpus != "" {
		args = append([]string{"taskset", "-c", cpus}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = w, logf
	check(cmd.Start())
	w.Close()
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) < 3 || f[0] != "ready" {
				continue
			}
			pid, _ := strconv.Atoi(strings.TrimPrefix(f[1], "pid="))
			s.readies <- ready{pid: pid, addr: strings.TrimPrefix(f[2], "tcp://"), at: time.Now()}
		}
	}()
	s.first = cmd
	s.r0 = s.next()
	s.pids = append(s.pids, s.r0.pid)
	return s
}

func (s *srv) next() ready {
	select {
	case r := <-s.readies:
		return r
	case <-time.After(30 * time.Second):
		log, _ := os.ReadFile(s.log)
		check(fmt.Errorf("no ready line in 30s:\n%s", log))
	}
	panic("unreachable")
}

func (s *srv) stop() {
	for _, pid := range s.pids {
		syscall.Kill(pid, syscall.SIGTERM)
	}
	s.first.Wait()
}

// idle opens n connections, restarts once and times it.
func idle(s *srv, n int) {
	r0 := s.r0
	rss0 := rss(r0.pid)
	cs := make([]net.Conn, n)
	parallel(n, func(i int) error {
		c, err := net.DialTimeout("tcp", r0.addr, 10*time.Second)
		if err != nil {
			return err
		}
		cs[i] = c
		return echo(c, []byte{'a' + byte(i%26)})
	})
	rssOld := rss(r0.pid)
	check(syscall.Kill(r0.pid, syscall.SIGHUP))
	r1 := s.next()
	s.pids = append(s.pids, r1.pid)
	err := s.first.Wait()
	exited := time.Now()
	if err != nil {
		fmt.Println("old process:", err)
	}
	failed := parallel(n, func(i int) error { return echo(cs[i], []byte{'A' + byte(i%26)}) })
	served := time.Now()
	rssNew := rss(r1.pid)
	log, _ := os.ReadFile(s.log)
	took := regexp.MustCompile(`multi: handed over" connections=(\d+) declined=(\d+) failed=(\d+) took=(\S+)`).FindSubmatch(log)
	fmt.Printf("connections %d\n", n)
	if took != nil {
		fmt.Printf("handed over %s declined %s failed %s in %s (HandOver, the old process's log)\n", took[1], took[2], took[3], took[4])
	}
	fmt.Printf("old process exited %v after the new one was ready\n", exited.Sub(r1.at).Round(time.Millisecond))
	fmt.Printf("every connection answered by the new process %v after it was ready (%d failed)\n", served.Sub(r1.at).Round(time.Millisecond), failed)
	fmt.Printf("RSS: a fresh process %.1f MiB; the old one with the connections %.1f MiB; the new one after adopting them %.1f MiB (%.0f B a connection over a fresh process)\n",
		mib(rss0), mib(rssOld), mib(rssNew), float64(rssNew-rss0)/float64(n))
	for _, c := range cs {
		c.Close()
	}
}

// keepalive runs the clients through restarts.
func keepalive(s *srv, clients, per, restarts int, every time.Duration) {
	addr := s.r0.addr
	var requests, failures atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 64)
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				c, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				for j := range per {
					msg := fmt.Appendf(buf[32:32], "%d/%d#%d", i, n, j)
					requests.Add(1)
					if err := echoInto(c, msg, buf[:len(msg)]); err != nil {
						failures.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
						break
					}
				}
				c.Close()
			}
		}()
	}
	cur := s.pids[0]
	began := time.Now()
	for range restarts {
		time.Sleep(every) // the pacing of the run, not a synchronisation
		check(syscall.Kill(cur, syscall.SIGHUP))
		r := s.next()
		s.pids = append(s.pids, r.pid)
		cur = r.pid
	}
	time.Sleep(every)
	close(stop)
	wg.Wait()
	log, _ := os.ReadFile(s.log)
	handed := 0
	for _, m := range regexp.MustCompile(`multi: handed over" connections=(\d+)`).FindAllSubmatch(log, -1) {
		k, _ := strconv.Atoi(string(m[1]))
		handed += k
	}
	fmt.Printf("%d clients, %d requests a connection, %d restarts in %v: %d requests, %d failed; %d connections handed over\n",
		clients, per, restarts, time.Since(began).Round(time.Millisecond), requests.Load(), failures.Load(), handed)
	if e := firstErr.Load(); e != nil {
		fmt.Println("first failure:", e)
	}
}

func echo(c net.Conn, msg []byte) error {
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return echoInto(c, msg, make([]byte, len(msg)))
}

func echoInto(c net.Conn, msg, got []byte) error {
	if _, err := c.Write(msg); err != nil {
		return err
	}
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if !bytes.Equal(got, msg) {
		return fmt.Errorf("echo %q of %q", got, msg)
	}
	return nil
}

// parallel runs f for 0..n-1 on 64 goroutines and returns how many failed
// (printing the first failure).
func parallel(n int, f func(i int) error) int {
	var next, failed atomic.Int64
	var once sync.Once
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := f(i); err != nil {
					failed.Add(1)
					once.Do(func() { fmt.Println("first failure:", err) })
				}
			}
		}()
	}
	wg.Wait()
	return int(failed.Load())
}

// rss is a process's VmRSS in bytes.
func rss(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// raiseNofile raises the descriptor limit to its hard limit (the
// machine's is 20000): the children inherit it.
func raiseNofile() {
	var l syscall.Rlimit
	check(syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l))
	l.Cur = l.Max
	check(syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l))
}

func check(err error) {
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		fmt.Fprintln(os.Stderr, "restart:", err)
		os.Exit(1)
	}
}
