package http1

import (
	"strconv"
	"time"
)

// AppendStatusLine appends "HTTP/1.1 code Reason\r\n".
func AppendStatusLine(dst []byte, code int) []byte {
	dst = append(dst, "HTTP/1.1 "...)
	dst = strconv.AppendInt(dst, int64(code), 10)
	dst = append(dst, ' ')
	dst = append(dst, StatusText(code)...)
	return append(dst, "\r\n"...)
}

// AppendHeader appends one field line "name: value\r\n".
func AppendHeader(dst []byte, name string, value []byte) []byte {
	dst = append(dst, name...)
	dst = append(dst, ": "...)
	dst = append(dst, value...)
	return append(dst, "\r\n"...)
}

// AppendContentLength appends "Content-Length: n\r\n".
func AppendContentLength(dst []byte, n int64) []byte {
	dst = append(dst, "Content-Length: "...)
	dst = itoa(dst, n)
	return append(dst, "\r\n"...)
}

// AppendChunk appends p as one chunk of a chunked body; an empty p would
// end the body, so it appends nothing (end it with AppendLastChunk).
func AppendChunk(dst, p []byte) []byte {
	if len(p) == 0 {
		return dst
	}
	dst = strconv.AppendInt(dst, int64(len(p)), 16)
	dst = append(dst, "\r\n"...)
	dst = append(dst, p...)
	return append(dst, "\r\n"...)
}

// AppendLastChunk appends the last chunk and an empty trailer section.
func AppendLastChunk(dst []byte) []byte { return append(dst, "0\r\n\r\n"...) }

// AppendError appends a complete response for a request the codec
// rejected (or any status): the status line, Date (if date is not nil),
// Connection: close, a text/plain body with the status and reason. The
// connection is to be closed once it is sent.
func AppendError(dst []byte, status int, reason string, date []byte) []byte {
	dst = AppendStatusLine(dst, status)
	if date != nil {
		dst = AppendHeader(dst, "Date", date)
	}
	body := strconv.Itoa(status) + " " + StatusText(status)
	if reason != "" {
		body += ": " + reason
	}
	body += "\n"
	dst = append(dst, "Content-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"...)
	dst = AppendContentLength(dst, int64(len(body)))
	dst = append(dst, "\r\n"...)
	return append(dst, body...)
}

// Continue is the interim response a server sends to a request with
// Expect: 100-continue before it reads the body.
var Continue = []byte("HTTP/1.1 100 Continue\r\n\r\n")

// dateFormat is IMF-fixdate (net/http.TimeFormat).
const dateFormat = "Mon, 02 Jan 2006 15:04:05 GMT"

// Date caches the value of a Date field (RFC 9110's IMF-fixdate, "Tue, 01
// Dec 2026 12:00:00 GMT") for the second it is in, so that a server formats
// it once a second rather than once a response. Keep one per loop
// (percore.PerLoop) and pass it the loop's clock (Loop.Now). Its zero value
// is ready to use. It is not safe for concurrent use.
type Date struct {
	sec int64
	buf [len(dateFormat)]byte
	ok  bool
}

// Get returns the Date value for now, valid until the next call.
func (d *Date) Get(now time.Time) []byte {
	if s := now.Unix(); !d.ok || s != d.sec {
		now.UTC().AppendFormat(d.buf[:0], dateFormat)
		d.sec, d.ok = s, true
	}
	return d.buf[:]
}
