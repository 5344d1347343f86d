// Package buildcheck holds one test: that a module outside this repository
// which imports percore builds with a plain `go build` (no -ldflags, no
// GOFLAGS of ours) and serves an echo round trip, and that its module graph
// (`go list -m all`) holds none of what only the benchmark module needs
// (gnet, netpoll, fasthttp, the WebSocket peers, vegeta, staticcheck). It is
// what users do first, and what giouring's link flag once broke
// (docs/decisions/0014-own-io_uring-binding.md,
// docs/decisions/0037-benchmark-module.md).
package buildcheck
