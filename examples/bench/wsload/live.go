//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/percore/percore/examples/bench/gwproto"
	"github.com/percore/percore/internal/hist"
)

// The storm's live client runs as a process of its own (wsload -mode
// live, started by -mode storm): in the storm's process its goroutine would
// wait in one Go scheduler's run queue behind thousands of redialing
// goroutines, and its round trips would time that queue, not the gateway.
// As a process it is one thread the kernel wakes like any other; it runs
// on the same CPUs as the storm (it inherits the affinity).

// liveResult is what the live client reports, on stdout, as JSON.
type liveResult struct {
	BeforeP99us float64 `json:"before_p99_us"`
	DuringP50us float64 `json:"during_p50_us"`
	DuringP99us float64 `json:"during_p99_us"`
	DuringMaxUs float64 `json:"during_max_us"`
	DuringRTTs  uint64  `json:"during_rtts"`
	Pings       uint64  `json:"pings"`
	Problem     string  `json:"problem,omitempty"`
}

// liveStdin is where -mode live reads its commands ("storm", "end").
var liveStdin io.Reader = os.Stdin

// runLive is -mode live: it dials connection -conns (one past the storm's
// subscribers), prints "ready", then sends a 16-byte binary message every
// -live-interval and times its echo, into "before" until a line "storm" on
// stdin and into "during" until "end" (or the end of stdin), and prints one
// liveResult.
func runLive(ctx context.Context, cfg config, stdout, stderr io.Writer) int {
	r := &runner{cfg: cfg, stderr: stderr}
	if err := r.prepare(); err != nil {
		fmt.Fprintf(stderr, "wsload live: %v\n", err)
		return 2
	}
	c, _, err := r.dial(ctx, cfg.conns, false)
	if err != nil {
		fmt.Fprintf(stderr, "wsload live: %v\n", err)
		return 2
	}
	defer abort(c.Conn())
	fmt.Fprintln(stdout, "ready")
	var phase atomic.Int32
	go func() {
		sc := bufio.NewScanner(liveStdin)
		for sc.Scan() {
			switch sc.Text() {
			case "storm":
				phase.Store(storming)
			case "end":
				phase.Store(ending)
			}
		}
		phase.Store(ending)
	}()
	var before, during hist.Histogram
	var res liveResult
	msg := make([]byte, 16)
	tick := time.NewTicker(cfg.liveInterval)
	defer tick.Stop()
	for seq := uint64(0); phase.Load() != ending && ctx.Err() == nil; seq++ {
		<-tick.C
		t := time.Now()
		binary.LittleEndian.PutUint64(msg, seq)
		binary.LittleEndian.PutUint64(msg[8:], uint64(t.UnixNano()))
		if err := c.WriteBinary(msg); err != nil {
			res.Problem = "write: " + err.Error()
			break
		}
		if err := c.Conn().SetReadDeadline(t.Add(stepTimeout)); err != nil {
			res.Problem = err.Error()
			break
		}
		op, p, err := c.ReadMessage()
		if err != nil {
			res.Problem = "read: " + err.Error()
			break
		}
		if op != gwproto.OpBinary || !bytes.Equal(p, msg) {
			res.Problem = fmt.Sprintf("echo %d differs", seq)
			break
		}
		d := int64(time.Since(t))
		switch phase.Load() {
		case calm:
			before.Record(d)
		case storming:
			during.Record(d)
		}
	}
	res.BeforeP99us = us(&before, 0.99)
	res.DuringP50us, res.DuringP99us, res.DuringMaxUs = us(&during, 0.5), us(&during, 0.99), us(&during, 1)
	res.DuringRTTs = during.Count()
	res.Pings = uint64(c.Pings)
	if err := json.NewEncoder(stdout).Encode(res); err != nil {
		return 2
	}
	if res.Problem != "" {
		return 1
	}
	return 0
}

// liveProc is the parent's handle on a live client process.
type liveProc struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	done bool
}

// startLive starts the live client and waits until it is connected.
func (r *runner) startLive(ctx context.Context, id int) (*liveProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self, "-mode", "live", "-addr", r.cfg.addr, "-secret", r.cfg.secret,
		"-conns", strconv.Itoa(id), "-live-interval", r.cfg.liveInterval.String(), "-src-ips", strconv.Itoa(r.cfg.srcIPs))
	cmd.Env = append(os.Environ(), liveChildEnv+"=1")
	cmd.Stderr = &lockedWriter{r: r}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	lp := &liveProc{cmd: cmd, in: in, out: bufio.NewReader(outPipe)}
	line, err := lp.out.ReadString('\n')
	if err != nil || line != "ready\n" {
		lp.kill()
		return nil, fmt.Errorf("the live client did not connect (%q, %v)", line, err)
	}
	return lp, nil
}

// say sends the live client a command.
func (lp *liveProc) say(cmd string) error {
	_, err := io.WriteString(lp.in, cmd+"\n")
	return err
}

// finish ends the live client's window and returns what it measured.
func (lp *liveProc) finish() (liveResult, error) {
	var res liveResult
	_ = lp.say("end")
	lp.in.Close()
	line, err := lp.out.ReadBytes('\n')
	werr := lp.cmd.Wait()
	lp.done = true
	if err != nil {
		return res, fmt.Errorf("the live client's result: %v (exit: %v)", err, werr)
	}
	if err := json.Unmarshal(line, &res); err != nil {
		return res, fmt.Errorf("the live client's result %q: %v", line, err)
	}
	if werr != nil && res.Problem == "" {
		return res, fmt.Errorf("the live client: %v", werr)
	}
	return res, nil
}

func (lp *liveProc) kill() {
	if !lp.done {
		_ = lp.cmd.Process.Kill()
		_ = lp.cmd.Wait()
		lp.done = true
	}
}

// liveChildEnv marks a live client process (for tests: their binary is
// not wsload, and its TestMain runs wsload's main when it is set).
const liveChildEnv = "WSLOAD_LIVE_CHILD"

// lockedWriter writes to the runner's stderr under its lock.
type lockedWriter struct{ r *runner }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.r.logMu.Lock()
	defer w.r.logMu.Unlock()
	return w.r.stderr.Write(p)
}
