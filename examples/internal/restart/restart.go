//go:build linux

// Package restart is the examples' zero-downtime restart
// (docs/operations.md#zero-downtime-restart), written once for
// examples/multi and examples/ws_gateway: on SIGHUP the old process starts
// a new copy of itself with every listening socket
// (Runtime.ListenerFiles, HandoverEnv) and a channel for its connections
// (HandoverSockets), waits until the copy says it serves, and hands it
// every established connection (Runtime.HandOver; the copy calls Adopt).
//
// Beside the sockets, the copy gets two pipes: one it writes a line to
// once it serves (Child.Ready), and one the old process closes once it
// has let go of what the copy may wait for (Parent.Release; its exit
// closes it too): ws_gateway's new process holds publishes until then, so
// that none reaches only the subscribers one process holds
// (docs/decisions/0059).
package restart

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	percore "github.com/percore/percore/runtime"
)

// The environment that names the pipes' descriptors in the new process.
const (
	readyEnv   = "PERCORE_RESTART_READY_FD"
	releaseEnv = "PERCORE_RESTART_RELEASE_FD"
)

// ReadyTimeout bounds how long Begin waits for the new process to serve.
const ReadyTimeout = 10 * time.Second

// Child is a process's view of the restart that started it. Its methods
// are safe for concurrent use.
type Child struct {
	ready    *os.File
	released chan struct{}
}

// Inherited returns the restart that started this process, or nil when
// it was not started by Begin. Call it before percore.ListenFiles (both
// read the environment, and ListenFiles clears its part); it clears its
// own variables, and marks the pipes close-on-exec so that a later
// restart's process does not inherit them.
func Inherited() *Child {
	rfd, _ := strconv.Atoi(os.Getenv(readyEnv))
	lfd, _ := strconv.Atoi(os.Getenv(releaseEnv))
	os.Unsetenv(readyEnv)
	os.Unsetenv(releaseEnv)
	if rfd <= 2 {
		return nil
	}
	c := &Child{released: make(chan struct{})}
	syscall.CloseOnExec(rfd)
	c.ready = os.NewFile(uintptr(rfd), "ready")
	if lfd <= 2 {
		close(c.released)
		return c
	}
	syscall.CloseOnExec(lfd)
	rel := os.NewFile(uintptr(lfd), "release")
	go func() {
		// Nothing is written: the read ends when the old process
		// releases or exits.
		io.Copy(io.Discard, rel)
		rel.Close()
		close(c.released)
	}()
	return c
}

// Ready tells the old process that this one serves. Call it once, when
// the runtime serves (and after Adopt).
func (c *Child) Ready() {
	if c == nil || c.ready == nil {
		return
	}
	fmt.Fprintln(c.ready, "ready")
	c.ready.Close()
	c.ready = nil
}

// Released is closed once the old process has let go (Parent.Release) or
// exited; for a process not started by Begin it is nil (c is nil).
func (c *Child) Released() <-chan struct{} { return c.released }

// Parent is the old process's side of a restart that Begin started.
type Parent struct {
	// Handoff is this process's end of the connections' channel: pass
	// it to Runtime.HandOver.
	Handoff *os.File
	release *os.File
	once    sync.Once
	// Pid is the new process's.
	Pid int
}

// Release tells the new process that this one has let go of what it may
// wait for. It is idempotent and safe from any goroutine.
func (p *Parent) Release() {
	p.once.Do(func() { p.release.Close() })
}

// Close releases and closes the channel.
func (p *Parent) Close() {
	p.Release()
	p.Handoff.Close()
}

// Begin starts a new copy of this program (its executable, with args)
// with every listening socket of rt and the channel for its connections,
// waits until it serves (Child.Ready, at most ReadyTimeout), and returns
// this side of the restart. A signal that arrives on sigs meanwhile is
// logged and ignored: a second SIGHUP cannot start a second copy.
func Begin(rt *percore.Runtime, args []string, stdout, stderr io.Writer, sigs <-chan os.Signal, log *slog.Logger) (*Parent, error) {
	files, err := rt.ListenerFiles()
	if err != nil {
		return nil, err
	}
	old, next, err := percore.HandoverSockets()
	if err != nil {
		for _, f := range files {
			f.Close()
		}
		return nil, err
	}
	files = append(files, next)
	var closeLater []*os.File
	defer func() {
		for _, f := range append(files, closeLater...) {
			f.Close()
		}
	}()
	fail := func(err error, more ...*os.File) (*Parent, error) {
		old.Close()
		for _, f := range more {
			f.Close()
		}
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	closeLater = append(closeLater, r)
	relR, relW, err := os.Pipe()
	if err != nil {
		return fail(err, w)
	}
	closeLater = append(closeLater, relR)
	exe, err := os.Executable()
	if err != nil {
		return fail(err, w, relW)
	}
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.ExtraFiles = append(append([]*os.File(nil), files...), w, relR)
	cmd.Env = append(os.Environ(), percore.HandoverEnv(files)...)
	cmd.Env = append(cmd.Env, readyEnv+"="+strconv.Itoa(3+len(files)), releaseEnv+"="+strconv.Itoa(4+len(files)))
	err = cmd.Start()
	w.Close()
	if err != nil {
		return fail(err, relW)
	}
	// The new process outlives this one; reap it should it exit first.
	go func() {
		if err := cmd.Wait(); err != nil {
			log.Error("restart: the new process exited", "pid", cmd.Process.Pid, "err", err)
		}
	}()
	line := make(chan error, 1)
	go func() {
		s, err := bufio.NewReader(r).ReadString('\n')
		if err == nil && s != "ready\n" {
			err = fmt.Errorf("new process said %q", s)
		}
		line <- err
	}()
	timeout := time.After(ReadyTimeout)
	for {
		select {
		case sig := <-sigs:
			log.Warn("restart: a restart is under way; signal ignored", "signal", sig)
		case err := <-line:
			if err != nil {
				return fail(fmt.Errorf("new process %d did not start: %w", cmd.Process.Pid, err), relW)
			}
			return &Parent{Handoff: old, release: relW, Pid: cmd.Process.Pid}, nil
		case <-timeout:
			cmd.Process.Kill()
			return fail(fmt.Errorf("new process %d not ready within %v", cmd.Process.Pid, ReadyTimeout), relW)
		}
	}
}
