//go:build linux

package runtime

import (
	"os"
	"strings"

	"github.com/percore/percore/runtime/tlsconn"
)

// Kernel TLS (kTLS), docs/decisions/0048-kernel-tls.md: with it, after the
// handshake the record keys would go to the kernel and the loop would send
// and receive plaintext, SendFile included. percore detects it and reports
// it, and does not hand keys over yet: these machines have no tls ULP to
// test it on, and nothing untested is presented as done.

// KernelTLSStatus is what New found of kernel TLS (Report.KernelTLS).
type KernelTLSStatus struct {
	// Available says the kernel offers the tls upper-layer protocol
	// (tls in /proc/sys/net/ipv4/tcp_available_ulp).
	Available bool
	// Off says Config.NoKernelTLS turned it off.
	Off bool
	// Used says TLS connections hand their record keys to the kernel:
	// never, today (the hand-over is not written).
	Used bool
	// Reason says why it is not used, in words.
	Reason string
}

// String is the report's line.
func (k KernelTLSStatus) String() string {
	switch {
	case k.Used:
		return "kernel TLS in use"
	case k.Available:
		return "kernel TLS available, not used: " + k.Reason
	}
	return "kernel TLS unavailable: " + k.Reason
}

// probeKernelTLS looks for the tls ULP once, at start.
func probeKernelTLS(cfg Config) KernelTLSStatus {
	st := KernelTLSStatus{Off: cfg.NoKernelTLS}
	ok, err := tlsconn.KernelTLS()
	switch {
	case err != nil:
		st.Reason = err.Error()
	case !ok:
		ulps := "nothing"
		if b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_available_ulp"); err == nil && len(strings.TrimSpace(string(b))) > 0 {
			ulps = strings.TrimSpace(string(b))
		}
		st.Reason = "no tls ULP (tcp_available_ulp lists " + ulps + "; modprobe tls, where the kernel has the module)"
	case cfg.NoKernelTLS:
		st.Available, st.Reason = true, "Config.NoKernelTLS"
	default:
		st.Available, st.Reason = true, "percore does not hand keys to the kernel yet; records are protected on the loop"
	}
	return st
}
