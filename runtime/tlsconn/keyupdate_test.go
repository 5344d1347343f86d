package tlsconn_test

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/percore/percore/runtime/tlsconn"
)

// raw13 is a test-only TLS 1.3 record layer (AES-GCM) over a wire, keyed
// from the secrets a crypto/tls client logged (tlsconn.KeyLog) and derived
// with tlsconn.TrafficKeysTLS13: the key extraction path kTLS would use,
// checked by talking to a session with it. crypto/tls cannot send a
// KeyUpdate; this can.
type raw13 struct {
	wire               net.Conn
	suite              uint16
	rdSecret, wrSecret []byte
	rd, wr             cipher.AEAD
	rdIV, wrIV         []byte
	rdSeq, wrSeq       uint64
}

func (r *raw13) key(t *testing.T, secret []byte) (cipher.AEAD, []byte) {
	k, err := tlsconn.TrafficKeysTLS13(r.suite, secret)
	if err != nil {
		t.Fatal(err)
	}
	b, err := aes.NewCipher(k.Key)
	if err != nil {
		t.Fatal(err)
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		t.Fatal(err)
	}
	return g, k.IV
}

func nonce(iv []byte, seq uint64) []byte {
	n := append([]byte(nil), iv...)
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], seq)
	for i := range s {
		n[len(n)-8+i] ^= s[i]
	}
	return n
}

func (r *raw13) send(t *testing.T, inner byte, p []byte) {
	plain := append(append([]byte(nil), p...), inner)
	n := len(plain) + r.wr.Overhead()
	hdr := []byte{23, 3, 3, byte(n >> 8), byte(n)}
	rec := r.wr.Seal(hdr, nonce(r.wrIV, r.wrSeq), plain, hdr)
	r.wrSeq++
	r.wire.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := r.wire.Write(rec); err != nil {
		t.Fatal(err)
	}
}

func (r *raw13) recv(t *testing.T) (inner byte, p []byte) {
	r.wire.SetReadDeadline(time.Now().Add(10 * time.Second))
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(r.wire, hdr); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(r.wire, body); err != nil {
		t.Fatal(err)
	}
	plain, err := r.rd.Open(nil, nonce(r.rdIV, r.rdSeq), body, hdr)
	if err != nil {
		t.Fatalf("record %d from the session does not open with the derived key: %v", r.rdSeq, err)
	}
	r.rdSeq++
	i := len(plain) - 1
	for i > 0 && plain[i] == 0 {
		i--
	}
	return plain[i], plain[:i]
}

// recvData returns the next application data, skipping session tickets.
func (r *raw13) recvData(t *testing.T) []byte {
	for {
		inner, p := r.recv(t)
		switch {
		case inner == 23:
			return p
		case inner == 22 && len(p) > 0 && p[0] == 4: // NewSessionTicket
		default:
			t.Fatalf("unexpected record: inner type %d, %x", inner, p)
		}
	}
}

// recordingConn keeps the first bytes written through it (the ClientHello).
type recordingConn struct {
	net.Conn
	first []byte
}

func (c *recordingConn) Write(p []byte) (int, error) {
	if c.first == nil {
		c.first = append([]byte(nil), p...)
	}
	return c.Conn.Write(p)
}

// TestKeyUpdate: a peer's KeyUpdate is handled inside Decrypt, on the
// loop: update_requested is answered (the answer under the old key, in
// Output, before anything later), and both directions go on under the new
// keys; update_not_requested changes only the read key.
func TestKeyUpdate(t *testing.T) {
	pool := newPool(t, tlsconn.PoolConfig{})
	_, peer := startServer(t, serverConfig(t), pool, echo)
	var klog tlsconn.KeyLog
	ccfg := clientConfig(t)
	ccfg.KeyLogWriter = &klog
	rec := &recordingConn{Conn: peer}
	cl := tls.Client(rec, ccfg)
	cl.SetDeadline(time.Now().Add(10 * time.Second))
	if err := cl.Handshake(); err != nil {
		t.Fatal(err)
	}
	st := cl.ConnectionState()
	if st.Version != tls.VersionTLS13 || (st.CipherSuite != tls.TLS_AES_128_GCM_SHA256 && st.CipherSuite != tls.TLS_AES_256_GCM_SHA384) {
		t.Skipf("negotiated %s: this test's record layer is AES-GCM only", tls.CipherSuiteName(st.CipherSuite))
	}
	secrets := klog.Take(rec.first[11:43]) // record 5 + handshake 4 + version 2
	r := &raw13{wire: peer, suite: st.CipherSuite, rdSecret: secrets["SERVER_TRAFFIC_SECRET_0"], wrSecret: secrets["CLIENT_TRAFFIC_SECRET_0"]}
	if r.rdSecret == nil || r.wrSecret == nil {
		t.Fatalf("key log has %v", secrets)
	}
	r.rd, r.rdIV = r.key(t, r.rdSecret)
	r.wr, r.wrIV = r.key(t, r.wrSecret)
	next := func(secret []byte) []byte {
		s, err := tlsconn.NextTrafficSecret(r.suite, secret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	expectEcho := func(msg string) {
		t.Helper()
		r.send(t, 23, []byte(msg))
		if got := string(r.recvData(t)); got != msg {
			t.Fatalf("echo %q, want %q", got, msg)
		}
	}
	expectEcho("before")

	// KeyUpdate(update_requested): the session answers, then rekeys.
	r.send(t, 22, []byte{24, 0, 0, 1, 1})
	r.wrSecret = next(r.wrSecret)
	r.wr, r.wrIV, r.wrSeq = nil, nil, 0
	r.wr, r.wrIV = r.key(t, r.wrSecret)
	inner, p := r.recv(t) // under the session's old key
	if inner != 22 || fmt.Sprintf("%x", p) != "1800000100" {
		t.Fatalf("answer: inner type %d, %x; want KeyUpdate(update_not_requested)", inner, p)
	}
	r.rdSecret = next(r.rdSecret)
	r.rd, r.rdIV = r.key(t, r.rdSecret)
	r.rdSeq = 0
	expectEcho("after one update")

	// KeyUpdate(update_not_requested): only the session's read key moves.
	r.send(t, 22, []byte{24, 0, 0, 1, 0})
	r.wrSecret = next(r.wrSecret)
	r.wr, r.wrIV = r.key(t, r.wrSecret)
	r.wrSeq = 0
	expectEcho("after two")
}
