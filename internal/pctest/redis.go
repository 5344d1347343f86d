//go:build linux

package pctest

import (
	"bufio"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// RedisServer is a real redis-server a test started on a free loopback
// port, without persistence, in a temporary directory; the test can kill
// it, start it again on the same port, and signal it (SIGSTOP, SIGCONT).
type RedisServer struct {
	t    *testing.T
	bin  string
	dir  string
	port string
	cmd  *exec.Cmd
}

// StartRedis starts a redis-server and waits until it listens; it skips t
// when redis-server is not installed, and kills the server when t ends.
func StartRedis(t *testing.T) *RedisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (Debian: apt-get install redis-server; scripts/ensure-tools.sh installs it)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	r := &RedisServer{t: t, bin: bin, dir: t.TempDir(), port: port}
	r.Start()
	t.Cleanup(r.Kill)
	return r
}

// Port returns the server's port.
func (r *RedisServer) Port() string { return r.port }

// Addr returns the server's host:port.
func (r *RedisServer) Addr() string { return "127.0.0.1:" + r.port }

// Start starts the server again, on the same port and directory, after
// Kill, and waits until it listens.
func (r *RedisServer) Start() {
	r.t.Helper()
	r.cmd = exec.Command(r.bin, "--port", r.port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", r.dir)
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	WaitFor(r.t, "redis-server to listen", func() bool {
		c, err := net.Dial("tcp", r.Addr())
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// Kill kills the server (a stopped one too) and waits for it to exit.
func (r *RedisServer) Kill() {
	if r.cmd == nil {
		return
	}
	r.cmd.Process.Signal(syscall.SIGCONT)
	r.cmd.Process.Kill()
	r.cmd.Wait()
	r.cmd = nil
}

// Signal sends s to the server.
func (r *RedisServer) Signal(s syscall.Signal) {
	if err := r.cmd.Process.Signal(s); err != nil {
		r.t.Fatal(err)
	}
}

// ReadReply reads one whole RESP reply, raw: a line, a bulk string's
// body, or an array's elements.
func ReadReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return line, err
	}
	switch line[0] {
	case '$':
		n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
		if n < 0 {
			return line, nil
		}
		body := make([]byte, n+2)
		_, err := io.ReadFull(r, body)
		return line + string(body), err
	case '*':
		n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
		for range n {
			el, err := ReadReply(r)
			line += el
			if err != nil {
				return line, err
			}
		}
	}
	return line, nil
}
