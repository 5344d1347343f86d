package http1

import "bytes"

// Response is a parsed response head. Its byte slices point into the input
// it was parsed from.
type Response struct {
	// Minor is the protocol's minor version (1 or 0).
	Minor int
	// Status is the three-digit status code.
	Status int
	// Reason is the reason phrase (possibly empty).
	Reason []byte
	// Header holds every field line, in order.
	Header Headers
	// ContentLength is the body's length: -1 when the body is chunked or
	// runs until the connection closes.
	ContentLength int64
	// Chunked says the body is chunked.
	Chunked bool
	// UntilClose says the body runs until the server closes the
	// connection (no length, no chunked coding: RFC 9112 6.3 rule 7).
	UntilClose bool
	// NoBody says no body follows: a 1xx, 204 or 304, or the response
	// to a HEAD request.
	NoBody bool
	// Close says the connection cannot carry another exchange after
	// this one: Connection: close, HTTP/1.0 without keep-alive, a body
	// until close, or a response framed by both Content-Length and
	// Transfer-Encoding (RFC 9112 6.3: the connection must close).
	Close bool
	// Trailer holds a chunked body's trailer fields, once its End was
	// returned.
	Trailer Headers
	// HeadLen is the length of the head, its empty line included.
	HeadLen int
}

// Interim reports whether the response is a 1xx, to be followed by the
// final response to the same request.
func (r *Response) Interim() bool { return r.Status < 200 }

// ParseResponse parses the response head at the start of data into r.
// head says whether it answers a HEAD request (then no body follows, whatever
// the fields say). It returns ok false, without an error, while the head is
// incomplete, and an *Error with Status 502 for a malformed response or one
// over lim.MaxHeaderBytes / lim.MaxHeaders: what a proxy answers its client.
func ParseResponse(data []byte, r *Response, head bool, lim Limits) (ok bool, err error) {
	lim = lim.withDefaults()
	if e := parseResponse(data, r, head, &lim); e != nil {
		return false, e
	}
	return r.HeadLen > 0, nil
}

func parseResponse(data []byte, r *Response, head bool, lim *Limits) *Error {
	r.HeadLen = 0
	end := data[:min(len(data), lim.MaxHeaderBytes)]
	ln, n, ok, err := line(end)
	if err != nil {
		return errStatusLine
	}
	if !ok {
		if len(data) > lim.MaxHeaderBytes {
			return errResponseHead
		}
		if len(data) >= 5 && string(data[:5]) != "HTTP/" {
			return errStatusLine
		}
		return nil
	}
	minor, status, reason, e := statusLine(ln)
	if e != nil {
		return e
	}
	r.Header.reset()
	r.Trailer.reset()
	m, ok, err := parseFields(end[n:], &r.Header, lim.MaxHeaders)
	if err != nil {
		return responseFieldError(err)
	}
	if !ok {
		if len(data) > lim.MaxHeaderBytes {
			return errResponseHead
		}
		return nil
	}
	r.Minor, r.Status, r.Reason = minor, status, reason
	if err := r.framing(head); err != nil {
		return err
	}
	r.HeadLen = n + m
	return nil
}

// statusLine parses HTTP-version SP 3DIGIT SP reason-phrase; the SP
// before an empty reason is often left out, and tolerated.
func statusLine(ln []byte) (minor, status int, reason []byte, err *Error) {
	if len(ln) < 12 || (len(ln) > 12 && ln[12] != ' ') || ln[8] != ' ' {
		return 0, 0, nil, errStatusLine
	}
	minor, e := parseVersion(ln[:8])
	if e != nil {
		return 0, 0, nil, errStatusLine
	}
	for _, c := range ln[9:12] {
		if c < '0' || c > '9' {
			return 0, 0, nil, errStatusLine
		}
		status = status*10 + int(c-'0')
	}
	if status < 100 {
		return 0, 0, nil, errStatusLine
	}
	if len(ln) > 13 {
		reason = ln[13:]
	}
	for _, c := range reason {
		if !fieldValue[c] {
			return 0, 0, nil, errStatusLine
		}
	}
	return minor, status, reason, nil
}

// responseFieldError is what a bad field line of a response head is: the
// proxy's 502.
func responseFieldError(err *Error) *Error {
	if err.Status == 431 {
		return errResponseHead
	}
	return &Error{502, "malformed response: " + err.Reason}
}

// framing applies RFC 9112 section 6.3 to the response's fields.
func (r *Response) framing(head bool) *Error {
	r.ContentLength, r.Chunked, r.UntilClose, r.NoBody = -1, false, false, false
	keepAlive, closeConn := false, false
	lengths := 0
	var length int64
	te := false
	chunkedLast := false
	for _, h := range r.Header.list {
		switch {
		case EqualFold(h.Name, "connection"):
			closeConn = closeConn || HasToken(h.Value, "close")
			keepAlive = keepAlive || HasToken(h.Value, "keep-alive")
		case EqualFold(h.Name, "content-length"):
			n, ok := parseContentLength(h.Value)
			if !ok || (lengths > 0 && n != length) {
				return errResponseLength
			}
			lengths++
			length = n
		case EqualFold(h.Name, "transfer-encoding"):
			te = true
			v := trimOWS(h.Value)
			i := bytes.LastIndexByte(v, ',')
			chunkedLast = EqualFold(trimOWS(v[i+1:]), "chunked")
		}
	}
	r.Close = closeConn || (r.Minor == 0 && !keepAlive)
	switch {
	case head || r.Status < 200 || r.Status == 204 || r.Status == 304:
		r.NoBody = true
		r.ContentLength = 0
		if lengths > 0 && !head {
			r.ContentLength = 0
		}
	case te && chunkedLast:
		r.Chunked = true
		if lengths > 0 {
			r.Close = true // both: Transfer-Encoding wins, and the connection closes
		}
	case te:
		// A coding this codec does not decode, not chunked last: the
		// body runs until close (RFC 9112 6.3 rule 4)
		r.UntilClose, r.Close = true, true
	case lengths > 0:
		r.ContentLength = length
	default:
		r.UntilClose, r.Close = true, true
	}
	return nil
}

// ResponseDecoder reads the responses of one connection, one after the
// other, as RequestDecoder reads requests. Before each response, Expect
// says whether it answers a HEAD. Its zero value is ready to use with the
// default limits (Limits.MaxBody does not apply: a client takes the body a
// server sends).
type ResponseDecoder struct {
	// Limits bounds the heads (MaxHeaderBytes, MaxHeaders).
	Limits Limits

	lim    Limits
	ready  bool
	head   bool
	inBody bool
	resp   Response
	body   body
	err    *Error
	scan   headScan // progress through a partial head
}

// Expect tells the decoder that the next response answers a HEAD request
// (head true) or another method: a HEAD's response has no body.
func (d *ResponseDecoder) Expect(head bool) { d.head = head }

// Next decodes from data as RequestDecoder.Next does. A 1xx response is a
// Head followed at once by End; the final response follows it.
func (d *ResponseDecoder) Next(data []byte) (n int, ev Event, piece []byte, err error) {
	if d.err != nil {
		return 0, NeedMore, nil, d.err
	}
	if !d.ready {
		d.lim, d.ready = d.Limits.withDefaults(), true
	}
	if !d.inBody {
		if e := d.parseHead(data); e != nil {
			d.err = e
			return 0, NeedMore, nil, e
		}
		if d.resp.HeadLen == 0 {
			return 0, NeedMore, nil, nil
		}
		d.inBody = true
		d.body = body{lim: &d.lim, trailer: &d.resp.Trailer, max: -1}
		switch {
		case d.resp.NoBody:
		case d.resp.Chunked:
			d.body.mode = bodyChunked
		case d.resp.UntilClose:
			d.body.mode = bodyClose
		case d.resp.ContentLength > 0:
			d.body.mode, d.body.remaining = bodyLength, d.resp.ContentLength
		}
		return d.resp.HeadLen, Head, nil, nil
	}
	n, ev, piece, e := d.body.next(data)
	if e != nil {
		d.err = &Error{502, "malformed response body: " + e.Reason}
		return n, NeedMore, nil, d.err
	}
	if ev == End {
		d.inBody = false
		if !d.resp.Interim() {
			d.head = false
		}
	}
	return n, ev, piece, nil
}

// parseHead parses the response head at the start of data, keeping the
// progress through a partial head, as RequestDecoder.head does.
func (d *ResponseDecoder) parseHead(data []byte) *Error {
	if !d.scan.active() {
		d.scan.scanned += int64(len(data))
		if e := parseResponse(data, &d.resp, d.head, &d.lim); e != nil || d.resp.HeadLen > 0 {
			return e
		}
	}
	whole, e := d.scan.response(data, &d.lim)
	if e != nil || !whole {
		d.resp.HeadLen = 0
		return e
	}
	d.scan.scanned += int64(d.scan.checked)
	d.scan.reset()
	return parseResponse(data, &d.resp, d.head, &d.lim)
}

// EOF tells the decoder that the connection's stream ended, and says
// whether the body in progress was complete: nil for a body that runs until
// close (it ends here) and between messages (whether a response was still
// awaited, the caller knows), io.ErrUnexpectedEOF for a body cut short.
func (d *ResponseDecoder) EOF() error {
	if !d.inBody {
		return nil
	}
	if err := d.body.eof(); err != nil {
		return err
	}
	d.inBody = false
	return nil
}

// Response returns the head of the response being decoded.
func (d *ResponseDecoder) Response() *Response { return &d.resp }

// InBody reports whether the decoder is between a Head and its End.
func (d *ResponseDecoder) InBody() bool { return d.inBody }

// Reset makes the decoder ready for a new connection.
func (d *ResponseDecoder) Reset() {
	d.inBody, d.err, d.head = false, nil, false
	d.scan.reset()
	d.resp.Header.reset()
	d.resp.Trailer.reset()
}
