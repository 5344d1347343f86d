//go:build linux

package httpd

import (
	"context"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"sync"

	"github.com/percore/percore/runtime/frame/http1"
)

// What a request through Adapt costs the heap, besides net/http's own
// types (the http.Request WithContext makes, its Header, the context):
// one adaptedRequest holding the ResponseWriter, the job, the URL and
// the first response buffer, and one string holding the target and every
// field, which the Request's strings are slices of. The channel a flush
// waits on is made by the first flush before the end.

// newAdaptedRequest builds the http.Request of the head hr, with the
// context ctx, around one adaptedRequest. It returns nil when the target
// is not a valid request URI.
func newAdaptedRequest(cn *conn, hr *http1.Request, h http.Handler, ctx context.Context) *adaptedRequest {
	ar := &adaptedRequest{cn: cn, h: h}
	ar.cond.L = &ar.mu
	fields := hr.Header.All()
	var sb strings.Builder
	n := len(hr.Target) + len(hr.Host)
	for _, f := range fields {
		n += len(f.Name) + len(f.Value)
	}
	sb.Grow(n)
	sb.Write(hr.Target)
	sb.Write(hr.Host)
	for _, f := range fields {
		sb.Write(f.Name)
		sb.Write(f.Value)
	}
	all := sb.String()
	target, rest := all[:len(hr.Target)], all[len(hr.Target):]
	host, rest := rest[:len(hr.Host)], rest[len(hr.Host):]
	u := &ar.url
	if !parseTarget(target, u) {
		pu, err := url.ParseRequestURI(target)
		if err != nil {
			return nil
		}
		u = pu
	}
	var hdr http.Header
	if len(fields) > 0 {
		hdr = make(http.Header, len(fields))
		vals := make([]string, len(fields))
		for i, f := range fields {
			name, value := rest[:len(f.Name)], rest[len(f.Name):len(f.Name)+len(f.Value)]
			rest = rest[len(f.Name)+len(f.Value):]
			k := textproto.CanonicalMIMEHeaderKey(name) // no copy when canonical
			if vs, ok := hdr[k]; ok {
				hdr[k] = append(vs, value)
				continue
			}
			vals[i] = value
			hdr[k] = vals[i : i+1 : i+1]
		}
	} else {
		hdr = make(http.Header)
	}
	base := http.Request{
		Method: methodString(hr.Method), URL: u, RequestURI: target,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: hr.Minor,
		Header: hdr, Host: host, Close: hr.Close, ContentLength: hr.ContentLength,
		RemoteAddr: cn.remoteAddr(),
	}
	if hr.Minor == 0 {
		base.Proto = "HTTP/1.0"
	}
	if u.Host != "" {
		base.Host = u.Host
	}
	if hr.Chunked {
		base.TransferEncoding = chunkedTE
	}
	if hr.HasBody() {
		ar.bodyv.ar = ar
		base.Body = &ar.bodyv
	} else {
		base.Body = http.NoBody
		ar.bodyDone = true
	}
	ar.rwv = responseWriter{ar: ar, hdr: make(http.Header), buf: ar.out[:0]}
	ar.rw = &ar.rwv
	ar.req = base.WithContext(ctx) // its copy is the request's one allocation; base stays on the stack
	return ar
}

var chunkedTE = []string{"chunked"}

// parseTarget fills u from an origin-form target whose path needs no
// unescaping (what url.ParseRequestURI would give, without its
// allocations), and reports false for any other, which the caller hands
// to url.ParseRequestURI.
func parseTarget(t string, u *url.URL) bool {
	if len(t) == 0 || t[0] != '/' {
		return false
	}
	path, query, hasQuery := strings.Cut(t, "?")
	if hasQuery && query == "" {
		return false // ForceQuery
	}
	for i := 0; i < len(path); i++ {
		if !plainPathByte[path[i]] {
			return false
		}
	}
	for i := 0; i < len(query); i++ {
		if c := query[i]; c < 0x20 || c == 0x7f || c == '#' {
			return false
		}
	}
	*u = url.URL{Path: path, RawQuery: query}
	return true
}

// plainPathByte is the path bytes that url.URL keeps as they are: its
// EscapedPath is the path itself, so RawPath stays empty.
var plainPathByte = func() (t [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range "-._~$&+,/:;=@" {
		t[c] = true
	}
	return t
}()

// methodString returns the method as a string, without allocating for the
// common ones.
func methodString(m []byte) string {
	switch string(m) {
	case "GET":
		return "GET"
	case "HEAD":
		return "HEAD"
	case "POST":
		return "POST"
	case "PUT":
		return "PUT"
	case "DELETE":
		return "DELETE"
	case "PATCH":
		return "PATCH"
	case "OPTIONS":
		return "OPTIONS"
	}
	return string(m)
}

// remoteAddr returns the peer's address as a string, formatted once per
// connection.
func (cn *conn) remoteAddr() string {
	if cn.remote == "" {
		if ra := cn.c.RemoteAddr(); ra != nil {
			cn.remote = ra.String()
		}
	}
	return cn.remote
}

// doneBox is a loop's queue of adapted requests whose handlers returned:
// the workers push, and one posted function (bound once per loop) ends
// them all on the loop, so that a final flush costs no closure and the
// loop one wake-up for many.
type doneBox struct {
	mu    sync.Mutex
	q     []*adaptedRequest
	run   []*adaptedRequest
	drain func()
}

// push queues ar (on a worker) and reports whether the drain must be
// posted (the queue was empty).
func (d *doneBox) push(ar *adaptedRequest) bool {
	d.mu.Lock()
	d.q = append(d.q, ar)
	first := len(d.q) == 1
	d.mu.Unlock()
	return first
}

// drainAll ends the queued requests (on the loop).
func (d *doneBox) drainAll() {
	d.mu.Lock()
	d.run, d.q = d.q, d.run[:0]
	d.mu.Unlock()
	for i, ar := range d.run {
		d.run[i] = nil
		ar.onLoop(ar.finalBuf, true, ar.finalP)
	}
}
