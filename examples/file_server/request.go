//go:build linux

package main

import (
	"path"
	"strconv"
	"strings"

	"github.com/percore/percore/runtime/frame/http1"
)

// request is a connection's request being served, copied out of the input
// (the head's slices are valid only during OnView).
type request struct {
	d      http1.RequestDecoder
	head   bool // HEAD
	method int  // 0 GET or HEAD, else the status to answer (405)
	name   []byte
	rng    []byte
	close  bool
	bad    int // a status found while reading the head (400, 403)
	out    []byte
	date   http1.Date
}

// begin copies what serving needs out of a request's head, and checks its
// method and name.
func (r *request) begin(req *http1.Request) {
	r.bad, r.method, r.close = 0, 0, req.Close
	switch string(req.Method) {
	case "GET":
		r.head = false
	case "HEAD":
		r.head = true
	default:
		r.method = 405
	}
	r.rng = append(r.rng[:0], req.Header.Get("Range")...)
	r.name, r.bad = cleanPath(r.name[:0], req.Target)
}

// cleanPath turns an origin-form target into a name relative to the root:
// the query dropped, percent-escapes decoded, "." segments and empty ones
// removed, and "index.html" added to a directory's name. A target that is
// not a path (400), has a NUL byte or a bad escape (400), or a ".."
// segment (403: it would leave the root, whatever the kernel would say)
// is refused with that status.
func cleanPath(dst, target []byte) ([]byte, int) {
	if len(target) == 0 || target[0] != '/' {
		return dst, 400
	}
	if i := strings.IndexByte(string(target), '?'); i >= 0 {
		target = target[:i]
	}
	var dec []byte
	for i := 0; i < len(target); i++ {
		b := target[i]
		if b == '%' {
			if i+2 >= len(target) {
				return dst, 400
			}
			v, err := strconv.ParseUint(string(target[i+1:i+3]), 16, 8)
			if err != nil {
				return dst, 400
			}
			b = byte(v)
			i += 2
		}
		if b == 0 {
			return dst, 400
		}
		dec = append(dec, b)
	}
	for _, seg := range strings.Split(string(dec), "/") {
		if seg == ".." {
			return dst, 403
		}
	}
	p := path.Clean(string(dec))
	if strings.HasSuffix(string(dec), "/") {
		p = path.Join(p, "index.html")
	}
	p = strings.TrimPrefix(p, "/")
	if p == "" {
		p = "index.html"
	}
	return append(dst, p...), 0
}

// parseRange parses a Range value of one byte range ("bytes=a-b",
// "bytes=a-", "bytes=-n") against a file of size bytes, and returns the
// range to send. ok is false for a range that cannot be satisfied (416).
// A value this server does not take (another unit, several ranges, bad
// syntax) is ignored, as RFC 9110 allows: the whole file, ok true.
func parseRange(v []byte, size int64) (off, n int64, ok bool) {
	s, found := strings.CutPrefix(string(v), "bytes=")
	if !found || strings.Contains(s, ",") {
		return 0, size, true
	}
	first, last, found := strings.Cut(strings.TrimSpace(s), "-")
	if !found {
		return 0, size, true
	}
	if first == "" {
		k, err := strconv.ParseInt(last, 10, 64)
		if err != nil || k < 0 {
			return 0, size, true
		}
		if k == 0 || size == 0 {
			return 0, 0, false
		}
		k = min(k, size)
		return size - k, k, true
	}
	a, err := strconv.ParseInt(first, 10, 64)
	if err != nil || a < 0 {
		return 0, size, true
	}
	b := size - 1
	if last != "" {
		if b, err = strconv.ParseInt(last, 10, 64); err != nil || b < a {
			return 0, size, true
		}
		b = min(b, size-1)
	}
	if a >= size {
		return 0, 0, false
	}
	return a, b - a + 1, true
}
