//go:build linux

package httpd

import (
	"time"

	"github.com/percore/percore/runtime/frame/http1"
)

// sentHead is the whole head of a loop's last keep-alive answer of Send:
// the status line, the fields every response has (Server, Date), the
// Head's fields, Content-Length and the empty line. The answers of a
// pipelined read (and of a busy loop) mostly repeat it, so that each is
// one copy of it and one of the body, the head formatted once per Head,
// length and second rather than per request.
type sentHead struct {
	h      *Head
	status int
	n      int   // the body's length
	sec    int64 // the second of loopState.common it was made with
	b      []byte
}

// sendHead returns the head of a keep-alive answer of Send with status,
// h's fields and a body of n bytes, valid until the next call.
func (ls *loopState) sendHead(s *Server, now time.Time, h *Head, status, n int) []byte {
	common := ls.common(s, now)
	sh := &ls.sent
	if sh.h == h && sh.n == n && sh.status == status && sh.sec == ls.headSec {
		return sh.b
	}
	b := sh.b[:0]
	if status == 200 {
		b = append(b, common...)
	} else {
		b = http1.AppendStatusLine(b, status)
		b = append(b, common[len(status200):]...)
	}
	b = append(b, h.fields...)
	b = http1.AppendContentLength(b, int64(n))
	b = append(b, "\r\n"...)
	*sh = sentHead{h: h, status: status, n: n, sec: ls.headSec, b: b}
	return b
}
