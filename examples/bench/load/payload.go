//go:build linux

package main

import "bytes"

// seqBytes is how many leading bytes of a request carry its sequence number.
const seqBytes = 8

// payload builds and checks the requests of one connection. A request is a
// fixed pattern that depends on the connection, with its first
// min(8, size) bytes replaced by the request's sequence number (little
// endian), so a reply that is stale, reordered, truncated, another
// connection's or corrupted fails the byte-for-byte comparison.
type payload struct {
	tmpl []byte
}

// newPayload returns the payload of connection id for requests of size bytes.
func newPayload(size, id int) payload {
	p := payload{tmpl: make([]byte, size)}
	for i := range p.tmpl {
		p.tmpl[i] = byte(i*31 + id*7 + 1)
	}
	return p
}

// size returns the request size.
func (p payload) size() int { return len(p.tmpl) }

// newBuffer returns a buffer of n requests, each already holding the pattern;
// stamp then only writes the sequence numbers.
func (p payload) newBuffer(n int) []byte {
	b := make([]byte, 0, n*len(p.tmpl))
	for range n {
		b = append(b, p.tmpl...)
	}
	return b
}

// stamp writes seq into req, a buffer from newBuffer (or one request of it).
func (p payload) stamp(req []byte, seq uint64) {
	n := min(seqBytes, len(req))
	for i := range n {
		req[i] = byte(seq >> (8 * i))
	}
}

// check reports whether reply is exactly request number seq.
func (p payload) check(reply []byte, seq uint64) bool {
	if len(reply) != len(p.tmpl) {
		return false
	}
	n := min(seqBytes, len(reply))
	for i := range n {
		if reply[i] != byte(seq>>(8*i)) {
			return false
		}
	}
	return bytes.Equal(reply[n:], p.tmpl[n:])
}
