//go:build linux

package main

import (
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"crypto/tls"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// With -tls-cert and -tls-key the TCP listener is tls://, and a SIGHUP
// restart keeps it TLS: the new process serves the inherited socket with
// the key pair it loaded itself.
func TestRestartKeepsTLS(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		pki := pctest.TestPKI()
		_, cert, key := pki.PEMFiles(t)
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd, readies, second := startPiped(t, exe, "-addr", "127.0.0.1:0", "-udp", "", "-unix", "", "-tls-cert", cert, "-tls-key", key,
			"-backend", b.String(), "-cores", "0", "-grace", "5s")
		first := parseReady(t, pctest.Recv(t, readies, "the server's ready line"))
		if first.tls == "" || first.tcp != "" {
			t.Fatalf("listeners %+v: want one tls:// listener", first)
		}
		echoTLS := func(msg string) {
			t.Helper()
			c, err := tls.Dial("tcp", first.tls, pki.ClientTLS())
			if err != nil {
				t.Fatalf("%s: %v", msg, err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			if _, err := c.Write([]byte(msg)); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, len(msg))
			if _, err := c.Read(buf); err != nil || string(buf) != msg {
				t.Fatalf("%s: echo %q, %v", msg, buf, err)
			}
		}
		echoTLS("before")
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		*second = parseReady(t, pctest.Recv(t, readies, "the new process's ready line"))
		if second.pid == first.pid || second.tls != first.tls {
			t.Fatalf("after the restart: %+v, before: %+v", *second, first)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("the old process: %v", err)
		}
		echoTLS("after") // only the new process serves now
		if err := syscall.Kill(second.pid, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		pctest.WaitFor(t, "the new process to exit", func() bool {
			return errors.Is(syscall.Kill(second.pid, 0), syscall.ESRCH)
		})
		second.pid = 0
	})
}
