// Package gwtest is the test every gateway of the protocol in gwproto
// passes: the peers of the benchmark (baseline/wsnbio, wsgws, wsgorilla)
// and, when it lands, examples/ws_gateway (which can import it from the
// benchmark module's tests, or copy its cases).
package gwtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/examples/bench/gwproto"
)

// Start starts a gateway on 127.0.0.1 with flags f (Addr is
// "127.0.0.1:0"), stops it in t.Cleanup, and returns its address.
type Start func(t *testing.T, f gwproto.Flags) string

const secret = "gwtest-secret"

// timeout bounds every step; no step waits on a timer otherwise.
const timeout = 10 * time.Second

func flags() gwproto.Flags {
	return gwproto.Flags{Addr: "127.0.0.1:0", Secret: secret, PingInterval: time.Minute, Queue: 256, WriteTimeout: 10 * time.Second}
}

// InProcess is the Start of a gateway served in the test's process by
// serve, on a loopback listener of its own, stopped (and its error
// reported) when the test ends.
func InProcess(serve func(context.Context, net.Listener, gwproto.Flags) error) Start {
	return func(t *testing.T, f gwproto.Flags) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- serve(ctx, ln, f) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
		return ln.Addr().String()
	}
}

// Run runs the protocol's cases against the gateway start starts.
func Run(t *testing.T, start Start) {
	t.Run("auth", func(t *testing.T) { auth(t, start(t, flags())) })
	t.Run("pubsub", func(t *testing.T) { pubsub(t, start(t, flags())) })
	t.Run("fanout-order", func(t *testing.T) { fanoutOrder(t, start(t, flags())) })
	t.Run("echo", func(t *testing.T) { echo(t, start(t, flags())) })
	t.Run("bad-command", func(t *testing.T) { badCommand(t, start(t, flags())) })
	t.Run("publish-errors", func(t *testing.T) { publishErrors(t, start(t, flags())) })
	t.Run("slow-consumer", func(t *testing.T) {
		f := flags()
		f.Queue = 4
		f.WriteTimeout = 200 * time.Millisecond
		slowConsumer(t, start(t, f), f.WriteTimeout)
	})
	t.Run("heartbeat", func(t *testing.T) {
		f := flags()
		f.PingInterval = 50 * time.Millisecond
		heartbeat(t, start(t, f))
	})
}

func dial(t *testing.T, addr, user string) *gwproto.Client {
	t.Helper()
	c, err := gwproto.Dial(addr, gwproto.URL(secret, user), timeout)
	if err != nil {
		t.Fatalf("dial as %s: %v", user, err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Conn().SetDeadline(time.Now().Add(timeout)); err != nil {
		t.Fatal(err)
	}
	return c
}

// Publish posts body to topic on the gateway at addr and returns the
// status and the answer's body.
func Publish(addr, topic, body string) (int, string, error) {
	resp, err := http.Post("http://"+addr+"/publish?topic="+topic, "text/plain", strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func publish(t *testing.T, addr, topic, body, want string) {
	t.Helper()
	code, got, err := Publish(addr, topic, body)
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusOK || got != want {
		t.Fatalf("publish %q to %s: %d %q, want 200 %q", body, topic, code, got, want)
	}
}

func expect(t *testing.T, c *gwproto.Client, op byte, want string) {
	t.Helper()
	gotOp, p, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("want %q: %v", want, err)
	}
	if gotOp != op || string(p) != want {
		t.Fatalf("got opcode %d %.80q, want %d %.80q", gotOp, p, op, want)
	}
}

func command(t *testing.T, c *gwproto.Client, sub bool, topic string) {
	t.Helper()
	if err := c.Command(sub, topic, nil); err != nil {
		t.Fatal(err)
	}
}

func auth(t *testing.T, addr string) {
	good := gwproto.Token(secret, "alice")
	for _, target := range []string{
		"/ws",
		"/ws?user=alice",
		"/ws?token=" + good,
		"/ws?user=bob&token=" + good,
		"/ws?user=alice&token=" + strings.ToUpper(good),
		"/ws?user=alice&token=" + gwproto.Token("another secret", "alice"),
		"/other?user=alice&token=" + good,
	} {
		c, err := gwproto.Dial(addr, target, timeout)
		var se *gwproto.StatusError
		if !errors.As(err, &se) || se.Code != http.StatusUnauthorized {
			if c != nil {
				c.Close()
			}
			t.Errorf("%s: %v, want a 401", target, err)
		}
	}
	c := dial(t, addr, "alice")
	command(t, c, true, "news")
}

func pubsub(t *testing.T, addr string) {
	c := dial(t, addr, "alice")
	publish(t, addr, "a", "before", "0")
	command(t, c, true, "a")
	command(t, c, true, "a") // twice: still one subscription
	publish(t, addr, "a", "hello", "1")
	expect(t, c, gwproto.OpText, "hello")
	command(t, c, false, "a")
	command(t, c, false, "a")
	publish(t, addr, "a", "not for alice", "0")
	command(t, c, true, "b")
	publish(t, addr, "b", "second", "1")
	// Had "not for alice" been sent, it would come first.
	expect(t, c, gwproto.OpText, "second")
}

func fanoutOrder(t *testing.T, addr string) {
	const subs, msgs = 5, 50
	cs := make([]*gwproto.Client, subs)
	for i := range cs {
		cs[i] = dial(t, addr, fmt.Sprintf("user%d", i))
		command(t, cs[i], true, "t")
	}
	other := dial(t, addr, "other")
	command(t, other, true, "u")
	for m := range msgs {
		publish(t, addr, "t", fmt.Sprintf("message %d", m), fmt.Sprint(subs))
	}
	publish(t, addr, "u", "for other", "1")
	for _, c := range cs {
		for m := range msgs {
			expect(t, c, gwproto.OpText, fmt.Sprintf("message %d", m))
		}
	}
	expect(t, other, gwproto.OpText, "for other")
	// A subscriber that leaves stops receiving, the others do not.
	command(t, cs[0], false, "t")
	publish(t, addr, "t", "last", fmt.Sprint(subs-1))
	for _, c := range cs[1:] {
		expect(t, c, gwproto.OpText, "last")
	}
}

func echo(t *testing.T, addr string) {
	c := dial(t, addr, "alice")
	sizes := []int{1, 64, 125, 126, 4000, 65535, 65536, 70000}
	for i, n := range sizes {
		p := make([]byte, n)
		for j := range p {
			p[j] = byte(i*31 + j)
		}
		if err := c.WriteBinary(p); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range sizes {
		op, p, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("echo %d of %d bytes: %v", i, n, err)
		}
		if op != gwproto.OpBinary || len(p) != n {
			t.Fatalf("echo %d: opcode %d, %d bytes, want a binary message of %d", i, op, len(p), n)
		}
		for j := range p {
			if p[j] != byte(i*31+j) {
				t.Fatalf("echo %d: byte %d differs", i, j)
			}
		}
	}
	// Text that is a command is still a command after binary traffic.
	command(t, c, true, "x")
}

func badCommand(t *testing.T, addr string) {
	c := dial(t, addr, "alice")
	for _, bad := range []string{"HELLO", "SUB", "SUB ", "PUB x", "SUB a b"} {
		if err := c.WriteText(bad); err != nil {
			t.Fatal(err)
		}
		op, p, err := c.ReadMessage()
		if err != nil || op != gwproto.OpText || !strings.HasPrefix(string(p), "ERR ") {
			t.Fatalf("%q: %d %q %v, want an ERR answer", bad, op, p, err)
		}
	}
	command(t, c, true, "ok")
}

func publishErrors(t *testing.T, addr string) {
	resp, err := http.Get("http://" + addr + "/publish?topic=a")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /publish: %d, want 405", resp.StatusCode)
	}
	code, _, err := Publish(addr, "", "x")
	if err != nil || code != http.StatusBadRequest {
		t.Errorf("publish without a topic: %d %v, want 400", code, err)
	}
}

// heartbeat: a client that answers Pings stays, one that does not is
// closed. Nothing here waits on a timer: the dead client reads until the
// server closes it (bounded by the read deadline).
func heartbeat(t *testing.T, addr string) {
	live := dial(t, addr, "live")
	dead := dial(t, addr, "dead")
	dead.NoPong = true
	type result struct {
		op  byte
		p   string
		err error
	}
	got := make(chan result, 1)
	go func() {
		op, p, err := live.ReadMessage() // answers Pings until a message comes
		got <- result{op, string(p), err}
	}()
	for {
		_, _, err := dead.ReadMessage()
		if err == nil {
			continue
		}
		var ce *gwproto.CloseError
		if errors.As(err, &ce) {
			continue // a Close frame, then the TCP close
		}
		if isTimeout(err) {
			t.Fatalf("a client that never answers Pings was not closed within %v (it saw %d Pings)", timeout, dead.Pings)
		}
		break // EOF or reset: closed
	}
	if dead.Pings == 0 {
		t.Errorf("closed without a Ping first")
	}
	if err := live.WriteText("SUB still-here"); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil || r.p != "OK SUB still-here" {
		t.Fatalf("the live client: %q %v", r.p, r.err)
	}
}

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

// Program builds the gateway program pkg (a package path as go build
// takes it, run in directory dir) once, and returns a Start that runs it
// with the protocol's flags and extra, reads the address it listens on
// from its "listening on ADDR" line, and stops it with SIGINT (it must
// exit 0 within 20 s). A program that exits before it listens skips the
// test when skipIfExits is set (a backend the machine cannot run), and
// fails it otherwise.
func Program(t *testing.T, dir, pkg string, skipIfExits bool, extra ...string) Start {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gateway")
	build := exec.Command("go", "build", "-o", bin, pkg)
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return func(t *testing.T, f gwproto.Flags) string {
		args := append([]string{"-addr", "127.0.0.1:0", "-secret", f.Secret, "-ping-interval", f.PingInterval.String(),
			"-queue", fmt.Sprint(f.Queue), "-write-timeout", f.WriteTimeout.String()}, extra...)
		cmd := exec.Command(bin, args...)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout = cmd.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		sc := bufio.NewScanner(stderr)
		var said []string
		for sc.Scan() {
			line := sc.Text()
			if _, addr, ok := strings.Cut(line, "listening on "); ok {
				go func() { // keep draining its output, then reap it
					for sc.Scan() {
					}
					done <- cmd.Wait()
				}()
				t.Cleanup(func() {
					_ = cmd.Process.Signal(os.Interrupt)
					select {
					case err := <-done:
						if err != nil {
							t.Errorf("%s exited: %v", pkg, err)
						}
					case <-time.After(20 * time.Second):
						_ = cmd.Process.Kill()
						t.Errorf("%s did not exit within 20s of SIGINT", pkg)
					}
				})
				return strings.Fields(addr)[0]
			}
			said = append(said, line)
		}
		err = cmd.Wait()
		if skipIfExits {
			t.Skipf("%s %q exited before listening (%v): %s", pkg, args, err, strings.Join(said, "\n"))
		}
		t.Fatalf("%s %q exited before listening (%v): %s", pkg, args, err, strings.Join(said, "\n"))
		return ""
	}
}

// slowConsumer: a subscriber that never reads is dropped (publishes stop
// counting it) and then closed, while a subscriber that reads gets every
// message, in order: the slow one does not hold it up. The publisher
// waits for the reading subscriber to have each message before the next,
// so that its queue never fills. The one wait on time: the slow
// subscriber is left unread for ten write timeouts before it is read,
// since reading it would let the stalled writes go on.
func slowConsumer(t *testing.T, addr string, writeTimeout time.Duration) {
	slow := dial(t, addr, "slow")
	command(t, slow, true, "firehose")
	good := dial(t, addr, "good")
	command(t, good, true, "firehose")
	pad := strings.Repeat("x", 16<<10)
	if err := good.Conn().SetDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	received := make(chan error, 1)
	receive := func(want string) error {
		if err := good.Conn().SetReadDeadline(time.Now().Add(timeout)); err != nil {
			return err
		}
		op, p, err := good.ReadMessage()
		if err != nil {
			return err
		}
		if op != gwproto.OpText || string(p) != want {
			return fmt.Errorf("got %.20q, want %.20q", p, want)
		}
		return nil
	}
	// 48 MiB: more than the socket buffers of one loopback connection hold.
	// Dropped means 20 publishes in a row: a queue that was full for a
	// moment (its writer not yet scheduled) empties again.
	const most, inARow = 3000, 20
	sent, dropped, run := 0, false, 0
	for ; sent < most && !dropped; sent++ {
		msg := fmt.Sprintf("%d %s", sent, pad)
		go func() { received <- receive(msg) }()
		code, reached, err := Publish(addr, "firehose", msg)
		if err != nil || code != http.StatusOK {
			t.Fatalf("publish %d: %d %v", sent, code, err)
		}
		if err := <-received; err != nil {
			t.Fatalf("the reading subscriber, message %d: %v", sent, err)
		}
		switch reached {
		case "2":
			run = 0
		case "1": // the slow subscriber was dropped or closed; the good one counted
			run++
			dropped = run == inARow
		default:
			t.Fatalf("publish %d reached %q subscribers, want 2 or 1", sent, reached)
		}
	}
	if !dropped {
		t.Fatalf("%d publishes of 16 KiB to a subscriber that never reads: never dropped", most)
	}
	time.Sleep(10 * writeTimeout) // see above
	// Long after its last publish, the reading subscriber's other writes
	// (an echo, an acknowledgement) are not held to that publish's
	// write deadline.
	if err := good.WriteBinary([]byte("still")); err != nil {
		t.Fatal(err)
	}
	if err := receiveOp(good, gwproto.OpBinary, "still"); err != nil {
		t.Fatalf("an echo long after the last publish: %v", err)
	}
	go func() { received <- receive("after") }()
	publish(t, addr, "firehose", "after", "1")
	if err := <-received; err != nil {
		t.Fatalf("the reading subscriber, after the slow one was dropped: %v", err)
	}
	command(t, good, false, "firehose")
	// The slow one is closed: reading it now finds what was buffered, then the end.
	if err := slow.Conn().SetDeadline(time.Now().Add(timeout)); err != nil {
		t.Fatal(err)
	}
	for {
		_, _, err := slow.ReadMessage()
		if err == nil {
			continue
		}
		if isTimeout(err) {
			t.Fatalf("the slow subscriber was dropped but not closed %v after its writes stalled", 10*writeTimeout)
		}
		break
	}
}

func receiveOp(c *gwproto.Client, op byte, want string) error {
	if err := c.Conn().SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	gotOp, p, err := c.ReadMessage()
	if err != nil {
		return err
	}
	if gotOp != op || string(p) != want {
		return fmt.Errorf("got opcode %d %.20q, want %d %.20q", gotOp, p, op, want)
	}
	return nil
}
