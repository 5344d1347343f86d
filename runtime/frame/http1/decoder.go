package http1

// RequestDecoder reads a connection's requests, one after the other
// (pipelined ones too): each request's Head, its body in Body pieces, then
// End. Its zero value is ready to use, with the default Limits; set Limits
// before the first Next. It belongs to one connection.
type RequestDecoder struct {
	// Limits bound every request (zero fields: the defaults).
	Limits Limits

	lim    Limits // Limits with the defaults, set at the first Next
	ready  bool
	inBody bool
	req    Request
	body   body
	err    *Error
	scan   headScan // progress through a partial head
}

// Next decodes from data, the connection's input that earlier calls did not
// consume (followed by what arrived since: the decoder reads on from where
// it stopped in a partial head). It returns how many bytes it consumed and
// what it found:
//
//   - Head: Request returns the head, whose slices point into data (valid
//     as long as data is). A partial head is never consumed: it is shown
//     again, with more bytes, at the next call.
//   - Body: piece is the next bytes of the body (a slice of data).
//   - End: the request is complete (Request().Trailer holds its trailers).
//   - NeedMore: call again once more bytes have arrived.
//
// An error is an *Error (the status to answer); the decoder then returns
// it from every call, since the stream's framing is lost.
func (d *RequestDecoder) Next(data []byte) (n int, ev Event, piece []byte, err error) {
	if d.err != nil {
		return 0, NeedMore, nil, d.err
	}
	if !d.ready {
		d.lim, d.ready = d.Limits.withDefaults(), true
	}
	if !d.inBody {
		if e := d.head(data); e != nil {
			d.err = e
			return 0, NeedMore, nil, e
		}
		if d.req.HeadLen == 0 {
			return 0, NeedMore, nil, nil
		}
		d.inBody = true
		d.body = body{lim: &d.lim, trailer: &d.req.Trailer, max: d.lim.MaxBody, tooLarge: errBodyTooLarge}
		switch {
		case d.req.Chunked:
			d.body.mode = bodyChunked
		case d.req.ContentLength > 0:
			d.body.mode, d.body.remaining = bodyLength, d.req.ContentLength
		}
		return d.req.HeadLen, Head, nil, nil
	}
	n, ev, piece, e := d.body.next(data)
	if e != nil {
		d.err = e
		return n, NeedMore, nil, e
	}
	if ev == End {
		d.inBody = false
	}
	return n, ev, piece, nil
}

// head parses the request head at the start of data, keeping the progress
// through a partial head (d.req.HeadLen is 0 while it is partial): a head
// whole in one read is parsed once; one in pieces is read on from where
// the last call stopped, and parsed once it is whole.
func (d *RequestDecoder) head(data []byte) *Error {
	if !d.scan.active() {
		d.scan.scanned += int64(len(data))
		if e := parseRequest(data, &d.req, &d.lim); e != nil || d.req.HeadLen > 0 {
			return e
		}
	}
	whole, e := d.scan.request(data, &d.lim)
	if e != nil || !whole {
		d.req.HeadLen = 0
		return e
	}
	d.scan.scanned += int64(d.scan.checked)
	d.scan.reset()
	return parseRequest(data, &d.req, &d.lim)
}

// Request returns the head of the request being decoded, from its Head
// event until the next request's Head. Its slices point into the input that
// Head was returned for.
func (d *RequestDecoder) Request() *Request { return &d.req }

// InBody reports whether the decoder is between a request's Head and its
// End.
func (d *RequestDecoder) InBody() bool { return d.inBody }

// Err returns the error that stopped the decoder, or nil.
func (d *RequestDecoder) Err() error {
	if d.err == nil {
		return nil
	}
	return d.err
}

// Reset makes the decoder ready for a new connection.
func (d *RequestDecoder) Reset() {
	d.inBody, d.err = false, nil
	d.scan.reset()
	d.req.Header.reset()
	d.req.Trailer.reset()
}
