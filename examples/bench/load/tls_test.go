//go:build linux

package main

import (
	"crypto/tls"
	"net"
	"sync/atomic"
	"testing"

	"github.com/percore/percore/internal/pctest"
)

// TestTLSEcho: -tls on the percore engines against a crypto/tls echo
// server, keep-alive and with a handshake per request (-reconnect).
func TestTLSEcho(t *testing.T) {
	for _, e := range engines[1:] { // the percore engines
		t.Run(e.name, func(t *testing.T) {
			var handshakes atomic.Int64
			addr := pctest.Serve(t, func(c net.Conn) {
				tc := tls.Server(c, pctest.TestPKI().ServerTLS())
				if tc.Handshake() == nil {
					handshakes.Add(1)
					echoHandler(tc)
				}
			}).Addr()
			for _, reconnect := range []bool{false, true} {
				handshakes.Store(0)
				wl := Workload{Addr: addr, Conns: 2, Bytes: 64, Pipeline: 1, Reconnect: reconnect, TLS: true}
				rec := runEngine(t, e.eng, wl, func(tot Totals) bool { return tot.Requests >= 50 })
				tot := rec.Totals()
				if tot.Errors != 0 || tot.Mismatches != 0 {
					t.Errorf("reconnect %v: errors %d, mismatches %d, want none", reconnect, tot.Errors, tot.Mismatches)
				}
				if reconnect && handshakes.Load() < int64(tot.Requests) {
					t.Errorf("%d handshakes for %d requests, want one per request", handshakes.Load(), tot.Requests)
				}
			}
		})
	}
}
