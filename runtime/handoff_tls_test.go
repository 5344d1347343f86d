package runtime_test

import (
	"bufio"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// A TLS connection's session (keys, sequence numbers) lives in the old
// process, so a restart never hands it over, whatever its handler says:
// it gets the protocol's goodbye and a close, while a plain connection
// beside it moves to the new runtime.
func TestHandoverDeclinesTLS(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		p := &hoPair{oldH: &hoHandler{name: "A"}, nextH: &hoHandler{name: "B"}, b: b}
		p.cores = allCores(t)[:1]
		pki := pctest.TestPKI()
		p.nextTLS = pki.ServerTLS() // the inherited tls:// listener stays TLS
		p.old = start(t, percore.Config{Backend: b, Listen: []string{"tls://127.0.0.1:0", "tcp://127.0.0.1:0"},
			TLS: pki.ServerTLS(), Cores: p.cores}, p.oldH)
		lns := p.old.Listeners()
		p.tcp = lns[1].Addr.String()
		var err error
		p.oldEnd, p.nextEnd, err = percore.HandoverSockets()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.oldEnd.Close(); p.nextEnd.Close() })

		plain := p.dial(t, 0, "c") // even i: TCP
		tc := tlsDial(t, lns[0].Addr.String(), pki.ClientTLS())
		t.Cleanup(func() { tc.Close() })
		_ = tc.SetDeadline(time.Now().Add(20 * time.Second))
		secure := &hoClient{c: tc, r: bufio.NewReader(tc), id: "s1"}
		if got, err := secure.ask(secure.id); err != nil || got != "ok A" {
			t.Fatalf("hello over TLS: %q, %v", got, err)
		}

		if err := pctest.Recv(t, p.handOver(t, 20*time.Second), "the hand-over"); err != nil {
			t.Fatal(err)
		}
		if got, err := plain.ask("x"); err != nil || got != "B c0 x" {
			t.Fatalf("plain connection after the hand-over: %q, %v; want the new runtime's answer", got, err)
		}
		s, err := secure.r.ReadString('\n')
		if s != "bye A\n" || err != nil {
			t.Fatalf("TLS connection: %q, %v; want the old process's goodbye", s, err)
		}
		if _, err := secure.r.ReadByte(); err == nil {
			t.Fatal("TLS connection: more after the goodbye")
		} else if !strings.Contains(err.Error(), "EOF") {
			t.Logf("TLS connection ends with %v", err)
		}
		if st := p.old.Stats(); st.HandedOff != 1 || st.HandoffDeclined != 1 {
			t.Fatalf("handed %d declined %d; want 1 and 1 (the TLS connection declined by the runtime)", st.HandedOff, st.HandoffDeclined)
		}
		if p.oldH.handedTo.Load() != 1 {
			t.Fatalf("OnHandover ran %d times; want 1 (never for the TLS connection)", p.oldH.handedTo.Load())
		}
	})
}
