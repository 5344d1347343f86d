// Package buildcheck holds one test: that a module outside this repository
// which imports percore builds with a plain `go build` (no -ldflags, no
// GOFLAGS of ours) and serves an echo round trip. It is what users do
// first, and what giouring's link flag once broke
// (docs/decisions/0014-own-io_uring-binding.md).
package buildcheck
