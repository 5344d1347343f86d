package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
)

// TestServe: the server answers each TLS connection's request with the
// idle reply, counts them, and answers its commands until its input ends.
func TestServe(t *testing.T) {
	if raceEnabled {
		t.Skip("-race: nbio's accept goroutine and its pollers share each connection without synchronisation the detector sees (see wsnbio's TestProtocol); run without -race")
	}
	_, cert, key := pctest.TestPKI().PEMFiles(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- run("127.0.0.1:0", cert, key, inR, outW); outW.Close() }()
	out := bufio.NewReader(outR)
	line := func() string {
		l, err := out.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(l)
	}
	addr, ok := strings.CutPrefix(line(), "listening ")
	if !ok {
		t.Fatal("no listening line")
	}
	const n = 3
	for i := range n {
		c, err := tls.Dial("tcp", addr, pctest.TestPKI().ClientTLS())
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write(pctest.IdleTLSRequest)
		got := make([]byte, len(pctest.IdleTLSReply))
		if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, []byte(pctest.IdleTLSReply)) {
			t.Fatalf("connection %d: reply %q, %v", i, got, err)
		}
	}
	for _, cmd := range []struct{ in, want string }{{"count", fmt.Sprint(n)}, {"gc", "ok"}, {"free", "ok"}, {"what", "unknown command"}} {
		fmt.Fprintln(inW, cmd.in)
		if got := line(); got != cmd.want {
			t.Errorf("%s: %q, want %q", cmd.in, got, cmd.want)
		}
	}
	inW.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
