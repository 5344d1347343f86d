//go:build linux

package main

import (
	"crypto/tls"
	"strings"

	percore "github.com/percore/percore/runtime"
)

// The Unix mode: -addr unix:///path (or unix://@name) makes the percore
// engine dial a Unix stream socket instead of TCP, with the same workload
// and the same check of every reply.

// isUnix reports whether addr names a Unix socket.
func isUnix(addr string) bool { return strings.HasPrefix(addr, "unix://") }

// dialTo starts lc's next connection: to the Unix socket or the TCP
// address of the workload.
func dialTo(lc *loopClient, h percore.Handler, done func(*percore.Conn, error)) error {
	if lc.wl.TLS {
		addr := lc.wl.Addr
		if !isUnix(addr) {
			addr = lc.addr.String()
		}
		// Full handshakes (no session cache), as a -reconnect run of new
		// TLS connections per second wants; the server is not verified.
		return lc.loop.DialTLS(addr, &tls.Config{InsecureSkipVerify: true, ServerName: "localhost"}, h, done)
	}
	if isUnix(lc.wl.Addr) {
		return lc.loop.Dial(lc.wl.Addr, h, done)
	}
	return lc.loop.DialAddrPort(lc.addr, h, done)
}
