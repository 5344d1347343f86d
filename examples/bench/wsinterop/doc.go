// Package wsinterop holds the interop tests of the WebSocket codec
// (runtime/frame/ws) against gorilla/websocket and lxzan/gws, both ways,
// with and without permessage-deflate. They live in the benchmark module so
// that the library's go.mod does not require either implementation
// (docs/decisions/0037-benchmark-module.md); the interop with node's ws
// package, which needs no Go dependency, stays in runtime/frame/ws.
package wsinterop
