//go:build linux

package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame/ws"
)

// serveEnv makes the test binary a gateway process (TestMain).
const serveEnv = "WS_GATEWAY_TEST_SERVE"

// proc is the gateway under test, across its restarts.
type proc struct {
	t       *testing.T
	dir     string
	logPath string
	addr    string
	cmd     *exec.Cmd
}

// startProc starts the gateway as a process of its own (a restart starts
// a copy of it), and waits until it serves.
func startProc(t *testing.T, b percore.Backend, grace time.Duration) *proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := &proc{t: t, dir: dir, logPath: filepath.Join(dir, "stderr")}
	logf, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })
	p.cmd = exec.Command(exe, "-addr", "127.0.0.1:0", "-backend", b.String(), "-cores", "0",
		"-secret", testSecret, "-grace", grace.String(), "-pidfile", filepath.Join(dir, "pid"))
	p.cmd.Env = append(os.Environ(), serveEnv+"=1")
	p.cmd.Stderr = logf // a file: a pipe would keep Wait waiting for the new process, which inherits it
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if pid := p.pid(); pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		p.cmd.Process.Kill()
		p.cmd.Wait()
	})
	re := regexp.MustCompile(`listening on (\S+)`)
	pctest.WaitFor(t, "the gateway's listening line", func() bool {
		m := re.FindStringSubmatch(p.log())
		if m != nil {
			p.addr = m[1]
		}
		return m != nil && p.pid() > 0
	})
	return p
}

func (p *proc) log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// pid is the serving process's, from -pidfile.
func (p *proc) pid() int {
	b, _ := os.ReadFile(filepath.Join(p.dir, "pid"))
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// restart sends SIGHUP; before is called once the old process has begun
// handing over. It returns when a new process serves and the old one has
// exited.
func (p *proc) restart(before func()) {
	t := p.t
	t.Helper()
	old := p.pid()
	began := strings.Count(p.log(), "handing over")
	if err := syscall.Kill(old, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	pctest.WaitFor(t, "the hand-over to begin", func() bool { return strings.Count(p.log(), "handing over") > began })
	if before != nil {
		before()
	}
	pctest.WaitFor(t, "a new process", func() bool { return p.pid() != old })
	pctest.WaitFor(t, fmt.Sprintf("process %d to exit", old), func() bool {
		// The first process is the test's child: a zombie until Wait.
		if old == p.cmd.Process.Pid {
			st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", old))
			return len(st) == 0 || strings.Contains(string(st), ") Z ")
		}
		return errors.Is(syscall.Kill(old, 0), syscall.ESRCH)
	})
}

// sub is one subscriber, held across the restarts.
type sub struct {
	c  net.Conn
	br *bufio.Reader
}

func (s *sub) send(t *testing.T, text string) {
	t.Helper()
	if _, err := s.c.Write(frame(0x81, []byte(text), false)); err != nil {
		t.Fatal(err)
	}
}

// expect reads the next frame: a text frame with want.
func (s *sub) expect(t *testing.T, want string) {
	t.Helper()
	s.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	op, p, err := readFrame(s.br)
	if err != nil || op != 0x1 || string(p) != want {
		t.Fatalf("got op %d %q, %v; want text %q", op, p, err, want)
	}
}

func publishTo(t *testing.T, hc *http.Client, addr, topic, body string) int {
	t.Helper()
	resp, err := hc.Post("http://"+addr+"/publish?topic="+topic, "text/plain", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n, err := strconv.Atoi(string(b))
	if resp.StatusCode != 200 || err != nil {
		t.Fatalf("publish: %s %q", resp.Status, b)
	}
	return n
}

// The case on both backends: subscribers are kept across two
// restarts, with their topics, on the same TCP connections (no reconnect,
// no SUB again); a publish after each restart reaches each subscriber
// once, on the keep-alive publisher connection that moved too; a client
// whose state is over MaxHandoverState gets close 1012; a client that
// completes a half-read frame once the hand-over began is answered and
// moves; one that never completes it is closed at the grace deadline.
func TestRestartKeepsSubscribers(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		const grace = 3 * time.Second
		p := startProc(t, b, grace)
		const n = 20
		subs := make([]*sub, n)
		for i := range subs {
			c, br := wsDialAddr(t, p.addr, "u"+strconv.Itoa(i))
			subs[i] = &sub{c, br}
			subs[i].send(t, "SUB news")
			subs[i].expect(t, "OK SUB news")
			if i%2 == 0 {
				subs[i].send(t, "SUB even")
				subs[i].expect(t, "OK SUB even")
			}
		}
		// A client in so many topics that its state does not fit.
		bc, bbr := wsDialAddr(t, p.addr, "big")
		big := &sub{bc, bbr}
		for k := 0; k*120 < percore.MaxHandoverState; k++ {
			topic := fmt.Sprintf("%03d%s", k, strings.Repeat("x", 117))
			big.send(t, "SUB "+topic)
			big.expect(t, "OK SUB "+topic)
		}
		// Two clients with half a frame each.
		hc1, hbr1 := wsDialAddr(t, p.addr, "half")
		half := &sub{hc1, hbr1}
		hc2, hbr2 := wsDialAddr(t, p.addr, "stuck")
		stuck := &sub{hc2, hbr2}
		halfFrame := frame(0x81, []byte("SUB late"), false)
		for _, s := range []*sub{half, stuck} {
			if _, err := s.c.Write(halfFrame[:4]); err != nil {
				t.Fatal(err)
			}
		}
		hc := &http.Client{}
		defer hc.CloseIdleConnections()
		if got := publishTo(t, hc, p.addr, "news", "before"); got != n {
			t.Fatalf("before the restart: reached %d, want %d", got, n)
		}
		for _, s := range subs {
			s.expect(t, "before")
		}

		for round := range 2 {
			var before func()
			if round == 0 {
				before = func() {
					if _, err := half.c.Write(halfFrame[4:]); err != nil {
						t.Fatal(err)
					}
				}
			}
			start := time.Now()
			p.restart(before)
			if round == 0 {
				half.expect(t, "OK SUB late")
				if code := closeCode(t, big.br); code != ws.CloseServiceRestart {
					t.Fatalf("the client over MaxHandoverState got %d, want 1012", code)
				}
				// The grace deadline closed the stuck one.
				stuck.c.SetReadDeadline(time.Now().Add(20 * time.Second))
				if _, err := io.Copy(io.Discard, stuck.br); err != nil && !strings.Contains(err.Error(), "reset") {
					t.Fatalf("the stuck client: %v, want its connection closed", err)
				}
				if d := time.Since(start); d < grace {
					t.Fatalf("the stuck client's connection closed after %v, before the grace deadline", d)
				}
			}
			body := "after " + strconv.Itoa(round)
			if got := publishTo(t, hc, p.addr, "news", body); got != n {
				t.Fatalf("round %d: news reached %d, want %d", round, got, n)
			}
			if got := publishTo(t, hc, p.addr, "even", body); got != n/2 {
				t.Fatalf("round %d: even reached %d, want %d", round, got, n/2)
			}
			if got := publishTo(t, hc, p.addr, "late", body); got != 1 {
				t.Fatalf("round %d: late reached %d, want 1", round, got)
			}
			for i, s := range subs {
				s.expect(t, body)
				if i%2 == 0 {
					s.expect(t, body)
				}
			}
			half.expect(t, body)
		}
		log := p.log()
		if !regexp.MustCompile(`handed over" connections=\d+ declined=1`).MatchString(log) {
			t.Fatalf("the first hand-over did not decline one:\n%s", log)
		}
	})
}

// TestHandoverStateKeepsUser: the state a client hands over carries its
// user's name and its topics, and the client adopted from it (here on
// another connection of the same process, standing in for the new one)
// has the same name and topics, whatever the names array did between
// (the review of decision 0079: no restart test reads the name).
func TestHandoverStateKeepsUser(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		r := startGateway(t, b, nil)
		l := r.rt.Loops()[0]
		a, abr := wsDial(t, r, "alice-of-the-first-hour")
		for _, topic := range []string{"news", "sport"} {
			a.Write(frame(0x81, []byte("SUB "+topic), false))
			if _, p, err := readFrame(abr); err != nil || string(p) != "OK SUB "+topic {
				t.Fatalf("SUB %s: %q, %v", topic, p, err)
			}
		}
		wsDial(t, r, "bob")
		wsDial(t, r, "carol") // enters after alice: her name is not the array's last
		pctest.OnLoop(t, l, func() {
			ls := r.g.loops.Get(l)
			var alice, bob *client
			for _, cl := range ls.clients {
				switch string(ls.user(cl)) {
				case "alice-of-the-first-hour":
					alice = cl
				case "bob":
					bob = cl
				}
			}
			if alice == nil || bob == nil {
				t.Fatal("alice or bob not in the loop's list")
			}
			st, err := alice.OnHandover(alice.c)
			if err != nil {
				t.Fatal(err)
			}
			up, err := r.g.adopt(bob.c, st)
			if err != nil {
				t.Fatal(err)
			}
			cl := up.(*client)
			if got := string(ls.user(cl)); got != "alice-of-the-first-hour" {
				t.Errorf("the adopted client's user is %q; want alice's", got)
			}
			if got := ls.topics.topics(cl); len(got) != 2 || got[0] != "news" || got[1] != "sport" {
				t.Errorf("the adopted client's topics are %q; want alice's", got)
			}
			ls.topics.leaveAll(cl)
			ls.exit(cl)
		})
	})
}
