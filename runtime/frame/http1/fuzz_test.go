package http1_test

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"testing"

	"github.com/percore/percore/runtime/frame/http1"
)

// first decodes the first request of in with the codec: ok is false when
// the codec rejects it or it is incomplete.
func first(in []byte) (r got, ok bool) {
	d := &http1.RequestDecoder{Limits: http1.Limits{MaxBody: -1}}
	off := 0
	inHead := true
	for {
		n, ev, piece, err := d.Next(in[off:])
		off += n
		if err != nil || ev == http1.NeedMore {
			return r, false
		}
		switch ev {
		case http1.Head:
			if !inHead {
				return r, false
			}
			inHead = false
			req := d.Request()
			r = got{method: string(req.Method), target: string(req.Target), minor: req.Minor, host: string(req.Host)}
			for _, h := range req.Header.All() {
				r.headers = append(r.headers, string(h.Name)+": "+string(h.Value))
			}
		case http1.Body:
			r.body += string(piece)
		case http1.End:
			return r, true
		}
	}
}

// canonical is the codec's headers in net/http's shape: canonical names,
// values in order, with the fields net/http takes out of Header removed
// and repeated Content-Length values (identical, or the codec rejects them)
// kept once.
func canonical(headers []string) http.Header {
	h := http.Header{}
	for _, f := range headers {
		name, value, _ := strings.Cut(f, ": ")
		key := textproto.CanonicalMIMEHeaderKey(name)
		switch key {
		case "Host", "Transfer-Encoding", "Trailer":
			continue
		case "Content-Length":
			if len(h[key]) > 0 {
				continue // net/http keeps one of identical values, as the codec reads them
			}
		}
		h[key] = append(h[key], value)
	}
	return h
}

// FuzzAgainstNetHTTP: every request that both the codec and net/http's
// http.ReadRequest accept yields the same method, target, version, headers,
// Host and body. (Each may reject what the other accepts: the codec is
// stricter on framing; the comparison is of what both let through.)
func FuzzAgainstNetHTTP(f *testing.F) {
	for _, s := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /x?y HTTP/1.0\r\n\r\n",
		"POST /u HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
		"POST /u HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;e=1\r\nhello\r\n0\r\nT: x\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nhi",
		"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nhi!",
		"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n",
		"GET / HTTP/1.1\nHost: a\n\n",
		"GET / HTTP/1.1\r\nHost : a\r\n\r\n",
		"GET / HTTP/1.1\r\nhost: a\r\nx-multi: 1\r\nX-Multi: 2\r\nAccept:  text/html \t\r\n\r\n",
		"PUT /p HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nz",
		"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET http://h/p HTTP/1.1\r\nHost: h\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX: \x80\xff\r\n\r\n",
		"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ours, ok := first(in)
		req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(in)))
		if err != nil {
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil || !ok {
			return
		}
		if ours.method != req.Method || ours.target != req.RequestURI || ours.minor != min(req.ProtoMinor, 1) {
			t.Fatalf("request line: codec %q %q 1.%d, net/http %q %q 1.%d",
				ours.method, ours.target, ours.minor, req.Method, req.RequestURI, req.ProtoMinor)
		}
		if strings.HasPrefix(ours.target, "/") && ours.host != req.Host {
			t.Fatalf("host: codec %q, net/http %q", ours.host, req.Host)
		}
		mine := canonical(ours.headers)
		theirs := req.Header.Clone()
		delete(theirs, "Host")
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range theirs {
				if !yield(k) {
					return
				}
			}
		}) {
			if !slices.Equal(mine[k], theirs[k]) {
				t.Fatalf("header %q: codec %q, net/http %q", k, mine[k], theirs[k])
			}
		}
		if len(mine) != len(theirs) {
			t.Fatalf("headers: codec %q, net/http %q", mine, theirs)
		}
		if ours.body != string(body) {
			t.Fatalf("body: codec %q, net/http %q", ours.body, body)
		}
	})
}
