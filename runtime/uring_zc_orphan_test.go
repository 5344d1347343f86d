//go:build linux

package runtime_test

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"golang.org/x/sys/unix"
)

// TestZeroCopySendOrphanForcedStop: a handler writes 1 MiB with zero copy
// and closes, to a peer that stays and never reads. The first completions
// come at once, the queue drains and the descriptor is closed, but the
// kernel keeps the orphaned socket's unacknowledged bytes, and their
// pages, for as long as the peer answers its window probes: the
// notifications do not come. A Shutdown past its context (a forced stop)
// must still return: the loop exits and keeps those buffers, never reused
// (before, it waited for the peer to go, minutes on loopback).
func TestZeroCopySendOrphanForcedStop(t *testing.T) {
	rt := start(t, zcConfig(t, 16<<10, 0), bigWriter{size: 1 << 20})
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var err error
		if cerr := rc.Control(func(fd uintptr) {
			err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	c, err := d.Dial("tcp", rt.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	pctest.WaitFor(t, "the server's close after its zero-copy reply", func() bool {
		s := rt.Stats()
		return s.Accepts == 1 && s.Open == 0 && s.ZeroCopySends > 0
	})
	before := percore.ZeroCopyAbandoned()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- rt.Shutdown(ctx) }()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			t.Logf("shutdown: %v", err)
		}
	case <-time.After(20 * time.Second): // a hang, not a timing: the fix returns at the context's end
		c.Close() // the peer's close resets the orphan, and the notifications come
		<-done
		t.Fatal("Shutdown past its context waited for the notifications of an orphaned socket's zero-copy sends")
	}
	t.Logf("kept %d bytes of buffers the kernel still held at the stop", percore.ZeroCopyAbandoned()-before)
}
