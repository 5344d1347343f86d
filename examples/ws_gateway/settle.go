//go:build linux

package main

// A storm of upgrades (a reconnection storm, or the first clients of a
// fresh process) leaves the Go heap larger than what it then holds: every
// upgrade makes garbage (the request's parse, the handshake's answer), and
// the collector lets the heap grow to twice what is live between cycles.
// The runtime returns the heap's free pages to the kernel once a storm of
// new connections has settled (Config.ReturnAfterStorm, on by default:
// runtime/heapreturn.go, docs/decisions/0076); the gateway sets its size
// from -return-after. A gateway's client connects once and upgrades once,
// so its connections are its upgrades (a refused upgrade's connection
// counts too: its garbage is the same). A second is calm when it counts at
// most a tenth of the busiest second's connections and bytes, so a gateway
// busy after its storm keeps its heap until its traffic falls; before it
// collects, every loop sheds what it kept of the storm: the runtime's
// spares, httpd's spare states and free buffers, and the loop's ws Pool's
// spares (setup registers Pool.Shed with Loop.OnShedSpares: decision
// 0080). It is not free for the loops: the forced collection stops every
// goroutine twice (short pauses), marks on a quarter of the Ps and
// scavenges on one; once per storm, at most once a minute. Decision 0072 and docs/performance.md "WebSocket gateway,
// floors, part 3" have what it saves.

// returnAfterStorm is Config.ReturnAfterStorm for -return-after: its
// value, and 0 (never) as the runtime says never (negative).
func returnAfterStorm(n uint64) int {
	if n == 0 {
		return -1
	}
	return int(min(n, uint64(1<<31-1)))
}
