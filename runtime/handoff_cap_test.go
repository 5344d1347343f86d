package runtime_test

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// Adopted connections count against MaxConns: a new process with a cap
// of 2 adopts all 4 of the old one's connections (none is refused), and
// then holds accepting (CapHolds) until enough of them closed; a client
// that connects meanwhile waits in the backlog and is served after (on
// io_uring the accept armed before the adoption is cancelled).
func TestHandoverAdoptedCountAgainstMaxConns(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		p := newHoPair(t, b, nil)
		p.cores = p.cores[:1]
		const n = 4
		clients := make([]*hoClient, n)
		for i := range clients {
			clients[i] = p.dial(t, 2*i, "c") // TCP
		}
		files, err := p.old.ListenerFiles()
		if err != nil {
			t.Fatal(err)
		}
		p.next = start(t, percore.Config{Backend: b, Inherited: files, Cores: p.cores, MaxConns: 2}, p.nextH)
		for _, f := range files {
			f.Close()
		}
		if err := p.next.Adopt(p.nextEnd); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		ctx := shutdownCtx(t, 20*time.Second)
		go func() { done <- p.old.HandOver(ctx, p.oldEnd) }()
		if err := pctest.Recv(t, done, "the hand-over"); err != nil {
			t.Fatal(err)
		}
		pctest.WaitFor(t, "every connection adopted", func() bool { return p.next.Stats().Adopted == n })
		if st := p.next.Stats(); st.Open != n || st.CapHolds != 1 {
			t.Fatalf("after adopting: open %d, cap holds %d; want %d open and accepting held", st.Open, st.CapHolds, n)
		}
		c, err := net.DialTimeout("tcp", p.tcp, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.Write([]byte("late\n")); err != nil {
			t.Fatal(err)
		}
		// A round trip through an adopted connection after the connect:
		// the loop has run the kernel's work for the connect by then (on
		// io_uring the completion of an accept that was still armed, which
		// pauseAccept cancels), so an accept past the cap would show.
		if got, err := clients[n-1].ask("ping"); err != nil || got != "B "+clients[n-1].id+" ping" {
			t.Fatalf("an adopted client: %q, %v", got, err)
		}
		if st := p.next.Stats(); st.Accepts != 0 {
			t.Fatalf("accepted %d at the cap", st.Accepts)
		}
		for _, cl := range clients[:n-1] {
			cl.c.Close()
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "ok B" {
			t.Fatalf("the client behind the cap: %q, %v", line, err)
		}
		if st := p.next.Stats(); st.Accepts != 1 {
			t.Fatalf("accepts %d, want 1", st.Accepts)
		}
	})
}
