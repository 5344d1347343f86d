package tlsconn_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/runtime/tlsconn"
)

// inMemoryPair is an established client and server session and what the
// client sends, for tests that mangle the wire between them.
func inMemoryPair(t testing.TB, pool *tlsconn.Pool, vers uint16) (srv, cli *tlsconn.Session) {
	t.Helper()
	ccfg := clientConfig(t)
	ccfg.MaxVersion = vers
	srv, cli = handshakePair(t, pool, serverConfig(t), ccfg)
	t.Cleanup(func() { srv.Close(); cli.Close() })
	return srv, cli
}

// TestMalformedRecords: what a peer's broken record does to a server
// session after the handshake: an alert crypto/tls sends, an *Error that
// says which, nothing delivered from the broken record.
func TestMalformedRecords(t *testing.T) {
	pool := newPool(t, tlsconn.PoolConfig{})
	rec := func(typ byte, vers uint16, body int) []byte {
		return append([]byte{typ, byte(vers >> 8), byte(vers), byte(body >> 8), byte(body)}, make([]byte, body)...)
	}
	cases := []struct {
		name   string
		vers   uint16
		mangle func(ct []byte) []byte
		alert  string // sent by the session
	}{
		{"bad-mac-13", tls.VersionTLS13, func(ct []byte) []byte { ct[len(ct)-1] ^= 1; return ct }, "bad_record_mac"},
		{"bad-mac-12", tls.VersionTLS12, func(ct []byte) []byte { ct[10] ^= 0x80; return ct }, "bad_record_mac"},
		{"oversized-13", tls.VersionTLS13, func([]byte) []byte { return rec(23, 0x0303, 16384+257)[:5] }, "record_overflow"},
		{"oversized-12", tls.VersionTLS12, func([]byte) []byte { return rec(23, 0x0303, 16384+2049)[:5] }, "record_overflow"},
		{"13-max-is-fine-in-12", tls.VersionTLS12, func([]byte) []byte { return rec(23, 0x0303, 16384+257) }, "bad_record_mac"},
		{"wrong-version", tls.VersionTLS13, func([]byte) []byte { return rec(23, 0x0301, 40)[:5] }, "protocol_version"},
		{"plaintext-handshake-13", tls.VersionTLS13, func([]byte) []byte { return rec(22, 0x0303, 40) }, "bad_record_mac"},
		{"short-aead-12", tls.VersionTLS12, func([]byte) []byte { return rec(23, 0x0303, 3) }, "bad_record_mac"},
		{"unknown-type-12", tls.VersionTLS12, func([]byte) []byte { return rec(24, 0x0303, 40) }, "bad_record_mac"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, cli := inMemoryPair(t, pool, tc.vers)
			good, _ := cli.Encrypt(nil, []byte("first"))
			bad, _ := cli.Encrypt(nil, []byte("second"))
			plain, err := srv.Decrypt(nil, append(good, tc.mangle(bad)...), 0)
			if string(plain) != "first" {
				t.Errorf("delivered %q, want only the good record's \"first\"", plain)
			}
			var e *tlsconn.Error
			if !errors.As(err, &e) || e.Op != "read" || !e.Sent || e.AlertName() != tc.alert {
				t.Fatalf("error %v (%#v), want %s sent", err, e, tc.alert)
			}
			// The alert goes to the peer, which sees it.
			out := srv.Output(nil)
			if len(out) == 0 {
				t.Fatal("no alert to send")
			}
			if _, cerr := cli.Decrypt(nil, out, 0); cerr == nil || !strings.Contains(cerr.Error(), "remote error") {
				t.Fatalf("peer read %v, want the alert", cerr)
			}
			// Sticky, and nothing is held.
			if _, err2 := srv.Decrypt(nil, good, 0); err2 != err {
				t.Fatalf("second Decrypt %v, want the same error", err2)
			}
			if srv.Buffered() != 0 {
				t.Fatalf("%d bytes held after the error", srv.Buffered())
			}
		})
	}
}

// TestRecordFraming is the seeded model test of the record path: random
// messages, encrypted in random Encrypt calls, cut at random points, read
// with random budgets. The oracle: what comes out is exactly what went in,
// in order, and the session never holds more than a record plus one read.
func TestRecordFraming(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TLSCONN_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("seed %d (TLSCONN_SEED=%d reproduces)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	pool := newPool(t, tlsconn.PoolConfig{})
	for round := range 6 {
		vers := []uint16{tls.VersionTLS12, tls.VersionTLS13}[round%2]
		srv, cli := inMemoryPair(t, pool, vers)
		var sent, wire, got []byte
		for range 40 {
			msg := make([]byte, rng.IntN(40_000)+1)
			for i := range msg {
				msg[i] = byte(rng.Uint32())
			}
			sent = append(sent, msg...)
			var err error
			if wire, err = cli.Encrypt(wire, msg); err != nil {
				t.Fatal(err)
			}
		}
		for len(wire) > 0 || srv.Buffered() > 0 {
			k := min(len(wire), rng.IntN(70_000)+1)
			if rng.IntN(4) == 0 {
				k = min(len(wire), rng.IntN(8)) // tiny: a header in pieces
			}
			budget := 0
			if rng.IntN(2) == 0 {
				budget = rng.IntN(50_000) + 1
			}
			before := srv.Buffered()
			plain, err := srv.Decrypt(nil, wire[:k], budget)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if budget > 0 && len(plain) >= budget+tlsconn.MaxPlaintext {
				t.Fatalf("seed %d: %d plaintext bytes for a budget of %d", seed, len(plain), budget)
			}
			if budget == 0 && srv.Buffered() >= tlsconn.MaxRecord {
				t.Fatalf("seed %d: %d bytes held with no budget", seed, srv.Buffered())
			}
			if srv.Buffered() > before+k {
				t.Fatalf("seed %d: held grew by more than the input", seed)
			}
			got = append(got, plain...)
			wire = wire[k:]
		}
		if !bytes.Equal(got, sent) {
			t.Fatalf("seed %d round %d: %d bytes out for %d in, or different", seed, round, len(got), len(sent))
		}
		// close_notify after it all: io.EOF.
		if _, err := srv.Decrypt(nil, cli.CloseNotify(nil), 0); err != io.EOF {
			t.Fatalf("seed %d: close_notify read as %v", seed, err)
		}
	}
}

// FuzzRecordPath mangles a crypto/tls peer's records on the wire (bytes
// flipped, cut, repeated, dropped) and feeds them in random pieces. The
// oracle: no panic, no hang, the session holds at most a record, and what
// it delivers is a prefix of what the peer sent (AEAD lets nothing else
// through).
func FuzzRecordPath(f *testing.F) {
	f.Add([]byte{}, uint16(0))
	f.Add([]byte{0, 5, 1}, uint16(1))
	f.Add([]byte{3, 0, 0xff, 9, 4, 0}, uint16(7))
	f.Add([]byte{1, 2, 0x80, 0, 0, 0x40, 2, 200, 0}, uint16(300))
	pool := tlsconn.NewPool(tlsconn.PoolConfig{})
	f.Cleanup(func() { pool.Close() })
	f.Fuzz(func(t *testing.T, ops []byte, chunk uint16) {
		vers := uint16(tls.VersionTLS13)
		if chunk&1 == 1 {
			vers = tls.VersionTLS12
		}
		srv, cli := inMemoryPair(t, pool, vers)
		var sent, wire []byte
		for i, n := range []int{10, 3000, 17000} {
			msg := bytes.Repeat([]byte{byte('a' + i)}, n)
			sent = append(sent, msg...)
			wire, _ = cli.Encrypt(wire, msg)
		}
		wire = append(wire, cli.CloseNotify(nil)...)
		// ops: triples (kind, where, what).
		for len(ops) >= 3 && len(wire) > 0 {
			at := int(ops[1]) * len(wire) / 256
			switch ops[0] % 4 {
			case 0:
				wire[at] ^= ops[2] | 1
			case 1:
				wire = wire[:at]
			case 2:
				wire = append(wire[:at:at], wire[at/2:]...)
			case 3:
				wire = append(wire[:at:at], wire[min(at+int(ops[2]), len(wire)):]...)
			}
			ops = ops[3:]
		}
		step := int(chunk)%5000 + 1
		var got []byte
		for len(wire) > 0 {
			k := min(step, len(wire))
			plain, err := srv.Decrypt(nil, wire[:k], int(chunk)%3*10000)
			got = append(got, plain...)
			if srv.Buffered() > tlsconn.MaxRecord+step && int(chunk)%3 == 0 {
				t.Fatalf("%d bytes held", srv.Buffered())
			}
			if err != nil {
				break
			}
			wire = wire[k:]
			for srv.Buffered() > 0 && int(chunk)%3 != 0 {
				before := srv.Buffered()
				plain, err = srv.Decrypt(nil, nil, int(chunk)%3*10000)
				got = append(got, plain...)
				if err != nil || srv.Buffered() == before {
					break
				}
			}
		}
		if !bytes.HasPrefix(sent, got) {
			t.Fatalf("delivered %d bytes that the peer did not send", len(got))
		}
	})
}
