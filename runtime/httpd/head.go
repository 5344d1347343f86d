//go:build linux

package httpd

import (
	"fmt"
	"strings"

	"github.com/percore/percore/runtime/frame/http1"
)

// Head is a response's status and header fields prepared once (at route
// registration, or in a package variable) and written with one copy:
// its fields are checked when it is made, not per response.
//
//	var plain = httpd.NewHead(200, "Content-Type", "text/plain")
//	mux.HandleFunc("GET /plaintext", func(w *httpd.Response, r *httpd.Request) {
//		w.SendString(plain, "Hello, World!")
//	})
//
// A Head is immutable and safe for concurrent use.
type Head struct {
	status int    // 0: the Response's (WriteHeader's, else 200)
	fields string // the field lines, "Name: value\r\n" each
}

// NewHead returns the head of status (101 or 200-999; 0 leaves the
// status to WriteHeader, 200 without it) with the fields given as name,
// value pairs. It panics on an odd number of strings, an informational
// status other than 101 (no final answer), a CR or LF in a name or a
// value (it would end the field or the head early), a name that is not
// an HTTP token, a value with a control character or surrounding
// whitespace (the checks http1's own parser makes of a
// response head), and on the fields the server writes itself:
// Content-Length, Transfer-Encoding, Date, and Connection but in a 101's
// head (Connection: Upgrade).
func NewHead(status int, fields ...string) *Head {
	if status != 0 && (status < 100 || status > 999) {
		panic(fmt.Sprintf("httpd: NewHead: status %d out of 100-999", status))
	}
	if status >= 100 && status < 200 && status != 101 {
		// An informational status is no answer: the client would wait
		// for the final one.
		panic(fmt.Sprintf("httpd: NewHead: status %d is informational, not a final answer", status))
	}
	if len(fields)%2 != 0 {
		panic(fmt.Sprintf("httpd: NewHead: %d strings, want name, value pairs", len(fields)))
	}
	var b strings.Builder
	for i := 0; i < len(fields); i += 2 {
		name, value := fields[i], fields[i+1]
		// A CR or LF would end the field, or the head, early: the parse
		// below stops at the first empty line, so it is refused here,
		// before anything is joined.
		if !validField(name) || !validField(value) {
			panic(fmt.Sprintf("httpd: NewHead: the field %q: %q has a CR or LF", name, value))
		}
		for _, own := range []string{"Content-Length", "Transfer-Encoding", "Connection", "Date"} {
			if http1.EqualFold([]byte(name), own) && !(own == "Connection" && status == 101) {
				panic(fmt.Sprintf("httpd: NewHead: %s is the server's to write", own))
			}
		}
		if value != strings.Trim(value, " \t") {
			panic(fmt.Sprintf("httpd: NewHead: the value of %q has surrounding whitespace", name))
		}
		b.WriteString(name)
		b.WriteString(": ")
		b.WriteString(value)
		b.WriteString("\r\n")
	}
	h := &Head{status: status, fields: b.String()}
	// The codec's own field checks, on the head as a client would read it.
	var resp http1.Response
	if ok, err := http1.ParseResponse([]byte("HTTP/1.1 200 OK\r\n"+h.fields+"\r\n"), &resp, true, http1.Limits{}); !ok || err != nil {
		panic(fmt.Sprintf("httpd: NewHead: the fields %q do not make a valid head: %v", fields, err))
	}
	if resp.Header.Len() != len(fields)/2 {
		panic(fmt.Sprintf("httpd: NewHead: the fields %q parse as %d fields", fields, resp.Header.Len()))
	}
	return h
}

// Status returns the head's status (0: the Response's).
func (h *Head) Status() int { return h.status }

// WriteHead writes h's status and fields, in one copy: as WriteHeader
// and AddHeader for each of them would. Fields may be added after it
// (AddHeader), and the body written as usual.
func (w *Response) WriteHead(h *Head) {
	if w.ended || w.framed || w.bodyAt > 0 {
		return
	}
	if !w.started && h.status != 0 {
		w.status = h.status
	}
	if !w.startHead() || !w.grow(len(h.fields)) {
		return
	}
	w.buf = append(w.buf, h.fields...)
}

// Send answers with h and body, the whole of the response: the status
// line, h's fields, a Content-Length and the body, reserved and written
// at once (the fast way to answer; a HEAD request gets the head alone).
// Call it first: on a response already started it adds h's fields if it
// still can and writes body as Write does. Writes after it are past the
// declared length (ErrBodyLength).
func (w *Response) Send(h *Head, body []byte) { send(w, h, body) }

// SendString is Send with a string body.
func (w *Response) SendString(h *Head, body string) { send(w, h, body) }

func send[T string | []byte](w *Response, h *Head, body T) {
	status := w.status
	if h.status != 0 {
		status = h.status
	}
	if w.started || w.ended || status < 200 || status == 204 || status == 304 || w.Gone() {
		// The general path: the framing rules of Write.
		w.WriteHead(h)
		w.ContentLength(int64(len(body)))
		write(w, body)
		return
	}
	cn := w.cn
	if !cn.closeAfter && !cn.shutdown && !cn.eof && w.minor != 0 {
		// Keep-alive: the whole head as the loop's last Send made it,
		// most often (sendHead).
		head := cn.ls.sendHead(cn.s, cn.c.Loop().Now(), h, status, len(body))
		if !w.grow(len(head) + len(body)) {
			return
		}
		w.status = status
		w.started, w.framed = true, true
		w.length, w.count = int64(len(body)), int64(len(body))
		w.buf = append(w.buf, head...)
		if !w.noBody {
			w.buf = append(w.buf, body...)
		}
		return
	}
	common := cn.ls.common(cn.s, cn.c.Loop().Now())
	// 128 more: a status line longer than a 200's (under 50 bytes), and
	// the tail (Connection, Content-Length, the empty line: under 64). The
	// room must hold it all: an append past it would leave the reserved
	// room.
	if !w.grow(len(common) + len(h.fields) + 128 + len(body)) {
		return
	}
	w.status = status
	w.started, w.framed = true, true
	w.length, w.count = int64(len(body)), int64(len(body))
	if status == 200 {
		w.buf = append(w.buf, common...)
	} else {
		w.buf = http1.AppendStatusLine(w.buf, status)
		w.buf = append(w.buf, common[len(status200):]...)
	}
	w.buf = append(w.buf, h.fields...)
	w.buf = w.appendTail(w.buf) // a Connection field
	if !w.noBody {
		w.buf = append(w.buf, body...)
	}
}
