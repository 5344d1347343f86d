package http1

import "bytes"

// The defaults of Limits' zero fields.
const (
	// DefaultMaxRequestLine is the longest request line, CRLF included
	// (nginx's large_client_header_buffers: 8 KiB).
	DefaultMaxRequestLine = 8 << 10
	// DefaultMaxHeaderBytes is the longest head: the request (or status)
	// line and every field line, up to the empty line that ends them.
	DefaultMaxHeaderBytes = 32 << 10
	// DefaultMaxHeaders is the most field lines of a head (or of a
	// trailer section).
	DefaultMaxHeaders = 100
	// DefaultMaxBody is the longest request body (nginx's
	// client_max_body_size is 1 MiB; a server that streams takes more).
	DefaultMaxBody = 8 << 20
	// maxChunkLine bounds a chunk-size line, extensions included.
	maxChunkLine = 4 << 10
)

// Limits bound what a decoder accepts. Zero fields mean their defaults;
// a negative MaxBody means no limit on the body.
type Limits struct {
	// MaxRequestLine is the longest request line, CRLF included: 414
	// past it. Zero means DefaultMaxRequestLine.
	MaxRequestLine int
	// MaxHeaderBytes is the longest head, or trailer section: 431 past
	// it. Zero means DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// MaxHeaders is the most field lines in a head or trailer section:
	// 431 past it. Zero means DefaultMaxHeaders.
	MaxHeaders int
	// MaxBody is the longest body, its framing not counted: 413 past
	// it (for a Content-Length at once, before any of the body; for a
	// chunked body as soon as the chunks declared exceed it). Zero means
	// DefaultMaxBody, negative means no limit.
	MaxBody int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxRequestLine <= 0 {
		l.MaxRequestLine = DefaultMaxRequestLine
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if l.MaxHeaders <= 0 {
		l.MaxHeaders = DefaultMaxHeaders
	}
	if l.MaxBody == 0 {
		l.MaxBody = DefaultMaxBody
	}
	return l
}

// Request is a parsed request head. Its byte slices point into the input it
// was parsed from, and are valid as long as that input is.
type Request struct {
	// Method is the request method (a token, case-sensitive).
	Method []byte
	// Target is the request target as sent: origin form ("/a?b"),
	// absolute form ("http://h/a"), authority form (CONNECT's "h:443")
	// or "*".
	Target []byte
	// Minor is the protocol's minor version: 1 for HTTP/1.1, 0 for
	// HTTP/1.0.
	Minor int
	// Host is the Host field's value (empty in an HTTP/1.0 request
	// without one).
	Host []byte
	// Header holds every field line, Host included, in order.
	Header Headers
	// ContentLength is the body's length; -1 for a chunked body.
	ContentLength int64
	// Chunked says the body is chunked (Transfer-Encoding: chunked).
	Chunked bool
	// Close says the connection closes after this request's response:
	// Connection: close, or HTTP/1.0 without Connection: keep-alive.
	Close bool
	// Expect100 says the client waits for a 100 Continue before it
	// sends the body (Expect: 100-continue with a body to send).
	Expect100 bool
	// Trailer holds the trailer fields of a chunked body, once its End
	// was returned.
	Trailer Headers
	// HeadLen is the length of the head, its final empty line included.
	HeadLen int
}

// HasBody reports whether a body follows the head.
func (r *Request) HasBody() bool { return r.Chunked || r.ContentLength > 0 }

// ParseRequest parses the request head at the start of data into r with
// the limits lim. It returns ok false, and no error, while the head is not
// yet whole (call it again with more bytes: nothing of data is consumed),
// and an *Error for a request that breaks the rules or the limits, as soon
// as that can be told (a request line over its limit without its end
// already is one). Empty lines (CRLF) before the request line are skipped,
// as RFC 9112 section 2.2 allows; they count in HeadLen.
func ParseRequest(data []byte, r *Request, lim Limits) (ok bool, err error) {
	lim = lim.withDefaults()
	if e := parseRequest(data, r, &lim); e != nil {
		return false, e
	}
	return r.HeadLen > 0, nil
}

// parseRequest is ParseRequest with the defaults filled in; it returns a
// *Error, not an error, so that the decoder's nil check costs nothing, and
// sets r.HeadLen to 0 while the head is incomplete.
func parseRequest(data []byte, r *Request, lim *Limits) *Error {
	r.HeadLen = 0
	skip := 0
	for len(data) >= skip+2 && data[skip] == '\r' && data[skip+1] == '\n' && skip < 8 {
		skip += 2
	}
	rest := data[skip:]
	// The request line.
	ln, n, ok, err := line(rest)
	if err != nil {
		return err
	}
	if !ok {
		if len(rest) >= lim.MaxRequestLine {
			return errLineTooLong
		}
		if len(data) > lim.MaxHeaderBytes {
			return errHeadTooLarge
		}
		if len(rest) == 1 && rest[0] == '\r' {
			return nil // perhaps an empty line before the request line
		}
		return checkPartialLine(rest)
	}
	if n > lim.MaxRequestLine {
		return errLineTooLong
	}
	if err := r.requestLine(ln); err != nil {
		return err
	}
	// The field lines.
	r.Header.reset()
	r.Trailer.reset()
	end := data[:min(len(data), lim.MaxHeaderBytes)]
	if skip+n > len(end) {
		return errHeadTooLarge
	}
	m, ok, err := parseFields(end[skip+n:], &r.Header, lim.MaxHeaders)
	if err != nil {
		return err
	}
	if !ok {
		if len(data) > lim.MaxHeaderBytes {
			return errHeadTooLarge
		}
		return nil
	}
	if err := r.semantics(lim); err != nil {
		return err
	}
	r.HeadLen = skip + n + m
	return nil
}

// checkPartialLine rejects an incomplete request line as soon as its
// method is known to be bad, so that garbage is not held until the limit.
func checkPartialLine(b []byte) *Error {
	for i, c := range b {
		if c == ' ' {
			if i == 0 {
				return errMethod
			}
			return nil
		}
		if !tchar[c] {
			return errMethod
		}
	}
	return nil
}

// requestLine parses method SP request-target SP HTTP-version.
func (r *Request) requestLine(ln []byte) *Error {
	sp1 := bytes.IndexByte(ln, ' ')
	if sp1 < 0 {
		return errRequestLine
	}
	method := ln[:sp1]
	if !isToken(method) {
		return errMethod
	}
	rest := ln[sp1+1:]
	sp2 := bytes.IndexByte(rest, ' ')
	if sp2 < 0 {
		return errRequestLine
	}
	target, version := rest[:sp2], rest[sp2+1:]
	if len(target) == 0 {
		return errTarget
	}
	for _, c := range target {
		if !targetChar[c] {
			return errTarget
		}
	}
	switch {
	case target[0] == '/':
	case len(target) == 1 && target[0] == '*':
		if string(method) != "OPTIONS" {
			return errTarget
		}
	case string(method) == "CONNECT":
		// authority form: host:port, checked no further here
	case hasSchemePrefix(target):
	default:
		return errTarget
	}
	minor, err := parseVersion(version)
	if err != nil {
		return err
	}
	r.Method, r.Target, r.Minor = method, target, minor
	return nil
}

// hasSchemePrefix reports whether t starts with a scheme and "://" (the
// absolute form).
func hasSchemePrefix(t []byte) bool {
	i := bytes.Index(t, []byte("://"))
	if i <= 0 {
		return false
	}
	for j, c := range t[:i] {
		alpha := 'a' <= c|0x20 && c|0x20 <= 'z'
		if !alpha && (j == 0 || !('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return true
}

// parseVersion parses "HTTP/1.1" or "HTTP/1.0" (the name is
// case-sensitive); another well-formed version is a 505.
func parseVersion(v []byte) (int, *Error) {
	if len(v) != 8 || string(v[:5]) != "HTTP/" || v[6] != '.' ||
		v[5] < '0' || v[5] > '9' || v[7] < '0' || v[7] > '9' {
		return 0, errVersion
	}
	if v[5] != '1' {
		return 0, errVersionNotSupp
	}
	return int(v[7] - '0'), nil // HTTP/1.x for x > 1 is served as 1.1 (RFC 9110 6.2)
}

// semantics reads the fields that frame the body and the connection, and
// applies RFC 9112's rules to them.
func (r *Request) semantics(lim *Limits) *Error {
	r.Host, r.ContentLength, r.Chunked, r.Expect100 = nil, 0, false, false
	if r.Minor > 1 {
		r.Minor = 1
	}
	keepAlive, closeConn := false, false
	hosts, lengths := 0, 0
	var te []byte
	teFields := 0
	expect := false
	for _, h := range r.Header.list {
		name := h.Name
		switch len(name) {
		case 4:
			if EqualFold(name, "host") {
				hosts++
				r.Host = h.Value
				if !validHost(h.Value) {
					return errBadHost
				}
			}
		case 6:
			if EqualFold(name, "expect") {
				if !EqualFold(h.Value, "100-continue") {
					return errExpect
				}
				expect = true
			}
		case 10:
			if EqualFold(name, "connection") {
				closeConn = closeConn || HasToken(h.Value, "close")
				keepAlive = keepAlive || HasToken(h.Value, "keep-alive")
			}
		case 14:
			if EqualFold(name, "content-length") {
				n, ok := parseContentLength(h.Value)
				if !ok {
					return errContentLength
				}
				if lengths > 0 && n != r.ContentLength {
					return errDiffLengths
				}
				lengths++
				r.ContentLength = n
			}
		case 17:
			if EqualFold(name, "transfer-encoding") {
				teFields++
				te = h.Value
			}
		}
	}
	if hosts > 1 {
		return errManyHosts
	}
	if hosts == 0 && r.Minor == 1 {
		return errNoHost
	}
	if teFields > 0 {
		if r.Minor == 0 {
			return errTE10
		}
		if lengths > 0 {
			return errLengthAndTE
		}
		if err := r.transferCoding(te, teFields); err != nil {
			return err
		}
		r.Chunked, r.ContentLength = true, -1
	}
	if lim.MaxBody >= 0 && r.ContentLength > lim.MaxBody {
		return errBodyTooLarge
	}
	r.Expect100 = expect && r.HasBody() && r.Minor == 1
	r.Close = closeConn || (r.Minor == 0 && !keepAlive)
	return nil
}

// transferCoding accepts exactly "chunked" as the only coding: RFC 9112
// section 6.1 makes chunked mandatory as the last coding of a request, and
// this codec decodes no other (501). Several Transfer-Encoding fields are
// read as their list joined; the check needs all of them, so with more than
// one field the decoder re-reads them.
func (r *Request) transferCoding(last []byte, fields int) *Error {
	chunked := 0
	check := func(v []byte) *Error {
		for len(v) > 0 {
			var elem []byte
			if i := bytes.IndexByte(v, ','); i >= 0 {
				elem, v = v[:i], v[i+1:]
			} else {
				elem, v = v, nil
			}
			elem = trimOWS(elem)
			switch {
			case len(elem) == 0:
				continue
			case EqualFold(elem, "chunked"):
				chunked++
			case chunked > 0:
				return errTENotLast
			default:
				return errTEUnknown
			}
		}
		return nil
	}
	if fields == 1 {
		if err := check(last); err != nil {
			return err
		}
	} else {
		for _, h := range r.Header.list {
			if EqualFold(h.Name, "transfer-encoding") {
				if err := check(h.Value); err != nil {
					return err
				}
			}
		}
	}
	switch chunked {
	case 0:
		return errTEUnknown // only empty elements
	case 1:
		return nil
	}
	return errTETwice
}

// validHost accepts a Host value without whitespace, commas or characters
// outside a uri-host and port (RFC 3986's reg-name, IP literals in
// brackets); an empty Host is valid (RFC 9110 7.2, for a URI without one).
func validHost(v []byte) bool {
	for _, c := range v {
		switch {
		case 'a' <= c|0x20 && c|0x20 <= 'z', '0' <= c && c <= '9':
		case bytes.IndexByte([]byte("-._~!$&'()*+;=:[]%"), c) >= 0:
		default:
			return false
		}
	}
	return true
}
