package http1

import "bytes"

// headScan keeps a partial head's progress between a decoder's calls, so
// that a head that arrives in many pieces is read once, not again from its
// start at every piece (issue 23): every line before checked is whole and
// passed the checks the full parse makes, and no LF lies in
// data[checked:seen]. It relies on the decoders' contract (frame.View's):
// each call's data begins with the bytes the last call did not consume.
// Once the head is whole the full parse runs over it once, and fills the
// Request or Response.
//
// The checks, and the order in which they fail, are parseRequest's and
// parseResponse's over the same bytes: a malformed line is rejected in the
// call that completes it, a head over its limits as soon as the stateless
// parse would tell.
type headScan struct {
	started bool // the start line (request or status line) is checked
	skip    int  // a request's empty lines before its request line, in bytes
	// method is how many bytes of a partial request line are known to be
	// method characters, or -1 once its first space is there.
	method  int
	checked int
	seen    int
	fields  int // field lines checked
	// scanned counts the bytes examined, for the tests that check the
	// work is linear in the head's size.
	scanned int64
}

// active reports whether h holds progress through a partial head.
func (h *headScan) active() bool { return h.started || h.seen > 0 }

func (h *headScan) reset() {
	s := h.scanned
	*h = headScan{scanned: s}
}

// search returns the index of the next LF in data[h.seen:limit], or -1
// with h.seen moved to limit.
func (h *headScan) search(data []byte, limit int) int {
	if h.seen >= limit {
		return -1
	}
	i := bytes.IndexByte(data[h.seen:limit], '\n')
	if i < 0 {
		h.scanned += int64(limit - h.seen)
		h.seen = limit
		return -1
	}
	h.scanned += int64(i + 1)
	return h.seen + i
}

// request reads on through a request head: whole reports that its final
// empty line is there (the full parse then takes it); err is the error
// parseRequest gives for data.
func (h *headScan) request(data []byte, lim *Limits) (whole bool, err *Error) {
	if h.seen > len(data) {
		h.reset() // not the input the progress was made on
	}
	if !h.started {
		skip := 0
		for len(data) >= skip+2 && data[skip] == '\r' && data[skip+1] == '\n' && skip < 8 {
			skip += 2
		}
		if skip != h.skip {
			h.skip, h.method = skip, 0
		}
		h.seen = max(h.seen, skip)
		rest := data[skip:]
		e := h.search(data, len(data))
		if e < 0 {
			switch {
			case len(rest) >= lim.MaxRequestLine:
				return false, errLineTooLong
			case len(data) > lim.MaxHeaderBytes:
				return false, errHeadTooLarge
			case len(rest) == 1 && rest[0] == '\r':
				return false, nil // perhaps an empty line before the request line
			}
			return false, h.partialMethod(rest)
		}
		if e == skip || data[e-1] != '\r' {
			return false, errBareLF
		}
		n := e + 1 - skip
		if n > lim.MaxRequestLine {
			return false, errLineTooLong
		}
		var r Request
		if err := r.requestLine(data[skip : e-1]); err != nil {
			return false, err
		}
		if skip+n > lim.MaxHeaderBytes {
			return false, errHeadTooLarge
		}
		h.scanned += int64(n)
		h.started, h.checked, h.seen = true, e+1, e+1
	}
	return h.fieldLines(data, lim, errHeadTooLarge, nil)
}

// partialMethod is checkPartialLine over a partial request line, from
// where the last call stopped.
func (h *headScan) partialMethod(rest []byte) *Error {
	if h.method < 0 {
		return nil
	}
	for i := h.method; i < len(rest); i++ {
		c := rest[i]
		if c == ' ' {
			if i == 0 {
				return errMethod
			}
			h.method = -1
			return nil
		}
		if !tchar[c] {
			return errMethod
		}
	}
	h.scanned += int64(len(rest) - h.method)
	h.method = len(rest)
	return nil
}

// response reads on through a response head, as request does for
// parseResponse.
func (h *headScan) response(data []byte, lim *Limits) (whole bool, err *Error) {
	if h.seen > len(data) {
		h.reset()
	}
	if !h.started {
		e := h.search(data, min(len(data), lim.MaxHeaderBytes))
		if e < 0 {
			switch {
			case len(data) > lim.MaxHeaderBytes:
				return false, errResponseHead
			case len(data) >= 5 && string(data[:5]) != "HTTP/":
				return false, errStatusLine
			}
			return false, nil
		}
		if e == 0 || data[e-1] != '\r' {
			return false, errStatusLine
		}
		if _, _, _, err := statusLine(data[:e-1]); err != nil {
			return false, err
		}
		h.scanned += int64(e + 1)
		h.started, h.checked, h.seen = true, e+1, e+1
	}
	return h.fieldLines(data, lim, errResponseHead, responseFieldError)
}

// trailers reads on through the trailer section at the start of data,
// as body.trailers does.
func (h *headScan) trailers(data []byte, lim *Limits) (whole bool, err *Error) {
	if h.seen > len(data) {
		h.reset()
	}
	h.started = true
	return h.fieldLines(data, lim, errTrailerTooLarge, func(err *Error) *Error {
		if err == errTooManyFields {
			return errTrailerTooLarge
		}
		return err
	})
}

// fieldLines checks the field lines from h.checked that are whole within
// the head's limit, up to the empty line that ends them (whole). tooLarge
// is the error of a section over the limit, and mapErr, when set, maps a
// line's error.
func (h *headScan) fieldLines(data []byte, lim *Limits, tooLarge *Error, mapErr func(*Error) *Error) (bool, *Error) {
	limit := min(len(data), lim.MaxHeaderBytes)
	for {
		e := h.search(data, limit)
		if e < 0 {
			if len(data) > lim.MaxHeaderBytes {
				return false, tooLarge
			}
			return false, nil
		}
		if e == h.checked || data[e-1] != '\r' {
			if mapErr != nil {
				return false, mapErr(errBareLF)
			}
			return false, errBareLF
		}
		ln := data[h.checked : e-1]
		h.scanned += int64(len(ln))
		h.checked, h.seen = e+1, e+1
		if len(ln) == 0 {
			return true, nil
		}
		if _, _, err := fieldLine(ln, h.fields, lim.MaxHeaders); err != nil {
			if mapErr != nil {
				return false, mapErr(err)
			}
			return false, err
		}
		h.fields++
	}
}
