package pctest

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
)

// The idle TLS client of the memory and handshake-storm measurements
// (runtime/tlsconn's and runtime's): a child process, so that its memory
// is not the server's.

// IdleTLSRequest is what the idle client sends on each connection, and
// IdleTLSReply what it waits for before it holds the connection.
var IdleTLSRequest = []byte("GET / HTTP/1.1\r\nHost: example.test\r\n\r\n")

const IdleTLSReply = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

// IdleTLSCAEnv carries the parent's test CA to the child, base64 DER.
const IdleTLSCAEnv = "TLSCONN_IDLE_CA"

// IdleTLSCAValue is IdleTLSCAEnv's value for ca.
func IdleTLSCAValue(ca *x509.Certificate) string {
	return base64.StdEncoding.EncodeToString(ca.Raw)
}

// IdleTLSClient dials n TLS connections to addr (32 at a time), verifying
// example.test against the CA in IdleTLSCAEnv, makes one request on each,
// prints "ready N FAILED" and holds them until its standard input closes.
// It returns the process's exit status.
func IdleTLSClient(addr string, n int) int {
	der, _ := base64.StdEncoding.DecodeString(os.Getenv(IdleTLSCAEnv))
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		fmt.Fprintln(os.Stderr, "idle client: no CA:", err)
		return 1
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	return idleClient(n, func() (net.Conn, error) {
		return tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "example.test"})
	}, "ok", os.Stdin)
}

// IdlePlainClient is IdleTLSClient without TLS, the storm measurement's
// control (the same connects and requests, no handshake): rounds times, n
// plain TCP connections to addr, 32 at a time, each sending IdleTLSRequest
// and waiting for it to come back (a server that echoes); each round's
// connections are closed before the next, the last round's held until
// standard input closes. Its "ready" line counts the last round.
func IdlePlainClient(addr string, n, rounds int) int {
	dial := func() (net.Conn, error) { return net.Dial("tcp", addr) }
	for range rounds - 1 {
		if rc := idleClient(n, dial, "\r\n\r\n", nil); rc != 0 {
			return rc
		}
	}
	return idleClient(n, dial, "\r\n\r\n", os.Stdin)
}

// idleClient dials n connections, 32 at a time, makes the request on each
// and reads until the reply ends with until. With hold, it prints the ready
// line and holds them until hold ends; without, it closes them at once.
func idleClient(n int, dial func() (net.Conn, error), until string, hold io.Reader) int {
	var mu sync.Mutex
	var conns []net.Conn
	var failed atomic.Int64
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 256)
			for next.Add(1) <= int64(n) {
				c, err := dial()
				if err != nil {
					failed.Add(1)
					continue
				}
				c.Write(IdleTLSRequest)
				got := 0
				for !bytes.HasSuffix(buf[:got], []byte(until)) {
					k, err := c.Read(buf[got:])
					if err != nil {
						break
					}
					got += k
				}
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if hold != nil {
		fmt.Printf("ready %d %d\n", len(conns), failed.Load())
		io.Copy(io.Discard, hold)
	}
	for _, c := range conns {
		c.Close()
	}
	return 0
}
