package tlsconn_test

import (
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/percore/percore/runtime/tlsconn"
)

// TestKernelTLSDetection: the probe reads what the kernel offers. Nothing
// here hands keys to a kernel: these machines have no tls ULP.
func TestKernelTLSDetection(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_available_ulp")
	if err != nil {
		t.Skipf("no /proc/sys/net/ipv4/tcp_available_ulp: %v", err)
	}
	got, err := tlsconn.KernelTLS()
	if err != nil {
		t.Fatal(err)
	}
	want := false
	for _, f := range strings.Fields(string(b)) {
		want = want || f == "tls"
	}
	if got != want {
		t.Fatalf("KernelTLS() = %v, the kernel offers %q", got, b)
	}
	if !got {
		t.Logf("this kernel offers no tls ULP (%q): a kTLS hand-over could not be tested here", strings.TrimSpace(string(b)))
	}
}

// TestBufferAccess fails when a Go release changed the tls.Conn fields a
// session manages (docs/decisions/0033-tls-engine.md): sessions still work
// then, each keeping a few KB more, and this says so.
func TestBufferAccess(t *testing.T) {
	if !tlsconn.BufferAccess() {
		t.Fatal("crypto/tls's Conn.rawInput, Conn.hand or Conn.input changed: idle sessions keep crypto/tls's buffers")
	}
}

// TestIdleSessionHeap: an established session that has read and written
// full records keeps no record buffer: its heap stays near crypto/tls's
// floor (the tls.Conn and two AEAD states, about 3.5 KB), not the 20 KB a
// tls.Conn keeps after one full record.
func TestIdleSessionHeap(t *testing.T) {
	pool := newPool(t, tlsconn.PoolConfig{})
	scfg, ccfg := serverConfig(t), clientConfig(t)
	const n = 100
	srvs := make([]*tlsconn.Session, n)
	big := make([]byte, 3*tlsconn.MaxPlaintext)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range srvs {
		s, c := handshakePair(t, pool, scfg, ccfg)
		ct, _ := c.Encrypt(nil, big)
		if p, err := s.Decrypt(nil, ct, 0); err != nil || len(p) != len(big) {
			t.Fatal(len(p), err)
		}
		ct, _ = s.Encrypt(nil, big)
		if _, err := c.Decrypt(nil, ct, 0); err != nil {
			t.Fatal(err)
		}
		c.Close()
		srvs[i] = s
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	t.Logf("%d B of heap per idle server session", per)
	if per > 8<<10 {
		t.Fatalf("%d B of heap per idle session: the record buffers stayed", per)
	}
	runtime.KeepAlive(srvs)
}
