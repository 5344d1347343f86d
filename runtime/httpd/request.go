//go:build linux

package httpd

import (
	"bytes"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame/http1"
)

// Request is a view of a request: its head parsed in place (slices of the
// connection's input), its path parameters, its query, its body. It
// belongs to the connection's loop, and is valid during the handler's
// call (for a held response, until End): copy what work elsewhere needs.
// Nothing in it allocates per request.
type Request struct {
	cn      *conn
	hr      *http1.Request
	path    []byte // the target's path (escaped), without the query
	query   []byte // the raw query, without '?'
	body    []byte
	trailer *http1.Headers

	params  [8]param
	nparams int
	more    []param // past the inline ones

	vals  [4]kv
	nvals int
	mvals []kv

	scratch []byte // decoded path segments and query values
}

type param struct {
	name  string
	value []byte
}

type kv struct{ key, val any }

// start points r at the head hr.
func (r *Request) start(hr *http1.Request) {
	path, query := splitTarget(hr.Target)
	r.startAt(hr, path, query)
}

// startAt is start with the target's path and query split already.
func (r *Request) startAt(hr *http1.Request, path, query []byte) {
	r.hr = hr
	r.path, r.query = path, query
	r.body, r.trailer = nil, nil
	// Written only when not empty already (end left most so): a slice
	// or pointer stored is a write barrier's check each.
	if r.nparams != 0 || len(r.more) != 0 {
		r.nparams, r.more = 0, r.more[:0]
	}
	if len(r.scratch) != 0 {
		r.scratch = r.scratch[:0]
	}
}

// rebase points r at the same request's head parsed again from a copy
// (hr), keeping its path parameters: their values move with it when they
// were slices of the target.
func (r *Request) rebase(hr *http1.Request) {
	old := r.hr.Target
	r.hr = hr
	r.path, r.query = splitTarget(hr.Target)
	move := func(v []byte) []byte {
		if len(v) == 0 || len(old) == 0 {
			return v
		}
		if i := offsetIn(old, v); i >= 0 {
			return hr.Target[i : i+len(v)]
		}
		return v // decoded into scratch: stays
	}
	for i := range r.nparams {
		r.params[i].value = move(r.params[i].value)
	}
	for i := range r.more {
		r.more[i].value = move(r.more[i].value)
	}
}

// offsetIn returns where v lies inside s (a sub-slice of it), or -1.
func offsetIn(s, v []byte) int {
	if cap(v) == 0 || cap(s) == 0 {
		return -1
	}
	sEnd := &s[:cap(s)][cap(s)-1]
	vEnd := &v[:cap(v)][cap(v)-1]
	if sEnd != vEnd || cap(v) > cap(s) {
		return -1
	}
	return cap(s) - cap(v)
}

// end forgets the request's values.
func (r *Request) end() {
	r.body, r.trailer = nil, nil
	if r.nvals == 0 && len(r.mvals) == 0 && len(r.more) == 0 && r.nparams == 0 {
		return // the common request: no values, no parameters
	}
	clear(r.vals[:r.nvals])
	r.nvals = 0
	clear(r.mvals)
	r.mvals = r.mvals[:0]
	clear(r.more)
	clear(r.params[:r.nparams])
	r.nparams = 0
}

func splitTarget(t []byte) (path, query []byte) {
	if len(t) > 0 && t[0] != '/' {
		// The absolute form: the path after the authority.
		if i := bytes.Index(t, []byte("://")); i >= 0 {
			rest := t[i+3:]
			j := bytes.IndexAny(rest, "/?")
			if j < 0 {
				return []byte("/"), nil
			}
			t = rest[j:]
			if t[0] == '?' {
				return []byte("/"), t[1:]
			}
		}
	}
	if len(t) <= 64 {
		// A short target, the common one: searched without a call.
		for i, c := range t {
			if c == '?' {
				return t[:i], t[i+1:]
			}
		}
		return t, nil
	}
	if i := bytes.IndexByte(t, '?'); i >= 0 {
		return t[:i], t[i+1:]
	}
	return t, nil
}

// Head returns the parsed head (method, target, version, every field).
func (r *Request) Head() *http1.Request { return r.hr }

// Method returns the request method.
func (r *Request) Method() []byte { return r.hr.Method }

// Target returns the request target as sent.
func (r *Request) Target() []byte { return r.hr.Target }

// Path returns the target's path, still escaped (%2F stays %2F), without
// the query.
func (r *Request) Path() []byte { return r.path }

// RawQuery returns the query, without its '?', still escaped.
func (r *Request) RawQuery() []byte { return r.query }

// Host returns the Host field's value.
func (r *Request) Host() []byte { return r.hr.Host }

// ProtoMinor returns the minor version: 1 for HTTP/1.1, 0 for HTTP/1.0.
func (r *Request) ProtoMinor() int { return r.hr.Minor }

// Header returns the value of the first field named name
// (case-insensitive), or nil.
func (r *Request) Header(name string) []byte { return r.hr.Header.Get(name) }

// Headers returns every field, in order.
func (r *Request) Headers() *http1.Headers { return &r.hr.Header }

// ContentLength returns the body's declared length: -1 for a chunked
// body, 0 for none.
func (r *Request) ContentLength() int64 { return r.hr.ContentLength }

// Body returns the whole body, for a Handler (which is called once it has
// arrived; a StreamHandler gets it in pieces instead, and nil here).
func (r *Request) Body() []byte { return r.body }

// Trailer returns a chunked body's trailer fields, for a Handler; nil
// otherwise.
func (r *Request) Trailer() *http1.Headers { return r.trailer }

// Conn returns the request's connection (as Response.Conn does).
func (r *Request) Conn() *percore.Conn { return r.cn.w.Conn() }

// PathValue returns the value of the path parameter name ({name} or
// {name...} in the route's pattern), unescaped; nil if there is none.
func (r *Request) PathValue(name string) []byte {
	for i := range r.nparams {
		if r.params[i].name == name {
			return r.params[i].value
		}
	}
	for i := range r.more {
		if r.more[i].name == name {
			return r.more[i].value
		}
	}
	return nil
}

func (r *Request) setParam(name string, v []byte) {
	if r.nparams < len(r.params) {
		r.params[r.nparams] = param{name, v}
		r.nparams++
		return
	}
	r.more = append(r.more, param{name, v})
}

// paramMark and paramReset let the router undo the parameters of a
// branch that did not match.
func (r *Request) paramMark() int { return r.nparams + len(r.more) }

func (r *Request) paramReset(m int) {
	if m <= len(r.params) {
		r.nparams = m
		r.more = r.more[:0]
		return
	}
	r.more = r.more[:m-len(r.params)]
}

// nextQueryPair splits the first &-separated pair off q: its key, its
// value (after the first '='; nil without one) and the rest; ok is false
// for an empty pair (as in "a=1&&b=2").
func nextQueryPair(q []byte) (k, v, rest []byte, ok bool) {
	pair := q
	if i := bytes.IndexByte(q, '&'); i >= 0 {
		pair, rest = q[:i], q[i+1:]
	}
	if len(pair) == 0 {
		return nil, nil, rest, false
	}
	k = pair
	if i := bytes.IndexByte(pair, '='); i >= 0 {
		k, v = pair[:i], pair[i+1:]
	}
	return k, v, rest, true
}

// Query returns the value of the first query parameter named name,
// decoded (%XX and '+'), and whether it is present.
func (r *Request) Query(name string) ([]byte, bool) {
	for q := r.query; len(q) > 0; {
		var k, v []byte
		var ok bool
		if k, v, q, ok = nextQueryPair(q); !ok {
			continue
		}
		if !queryKeyIs(k, name) {
			continue
		}
		if d, ok := r.unescape(v, true); ok {
			return d, true
		}
		return nil, false // malformed escape: as if absent
	}
	return nil, false
}

// EachQuery calls f with every query parameter, decoded, in order, until
// f returns false. The slices are valid during the request.
func (r *Request) EachQuery(f func(key, value []byte) bool) {
	for q := r.query; len(q) > 0; {
		var k, v []byte
		var ok bool
		if k, v, q, ok = nextQueryPair(q); !ok {
			continue
		}
		dk, ok1 := r.unescape(k, true)
		dv, ok2 := r.unescape(v, true)
		if ok1 && ok2 && !f(dk, dv) {
			return
		}
	}
}

// queryKeyIs compares an escaped query key with name.
func queryKeyIs(k []byte, name string) bool {
	if bytes.IndexByte(k, '%') < 0 && bytes.IndexByte(k, '+') < 0 {
		return string(k) == name
	}
	j := 0
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch c {
		case '+':
			c = ' '
		case '%':
			if i+2 >= len(k) || !ishex(k[i+1]) || !ishex(k[i+2]) {
				return false
			}
			c = unhex(k[i+1])<<4 | unhex(k[i+2])
			i += 2
		}
		if j >= len(name) || name[j] != c {
			return false
		}
		j++
	}
	return j == len(name)
}

// unescape decodes %XX (and '+' as a space in a query) into the
// request's scratch buffer, or returns v itself when there is nothing to
// decode; ok is false for a malformed escape.
func (r *Request) unescape(v []byte, query bool) ([]byte, bool) {
	if bytes.IndexByte(v, '%') < 0 && (!query || bytes.IndexByte(v, '+') < 0) {
		return v, true
	}
	start := len(r.scratch)
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '+' && query:
			c = ' '
		case c == '%':
			if i+2 >= len(v) || !ishex(v[i+1]) || !ishex(v[i+2]) {
				r.scratch = r.scratch[:start]
				return nil, false
			}
			c = unhex(v[i+1])<<4 | unhex(v[i+2])
			i += 2
		}
		r.scratch = append(r.scratch, c)
	}
	return r.scratch[start:len(r.scratch):len(r.scratch)], true
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// SetValue stores a value for the rest of the request under key (a
// middleware's result for the handler it calls), as context.WithValue
// would, without allocating: keys are compared with ==, use a type of
// your own. Values are dropped when the request ends.
func (r *Request) SetValue(key, val any) {
	for i := range r.nvals {
		if r.vals[i].key == key {
			r.vals[i].val = val
			return
		}
	}
	for i := range r.mvals {
		if r.mvals[i].key == key {
			r.mvals[i].val = val
			return
		}
	}
	if r.nvals < len(r.vals) {
		r.vals[r.nvals] = kv{key, val}
		r.nvals++
		return
	}
	r.mvals = append(r.mvals, kv{key, val})
}

// Value returns the value SetValue stored under key, or nil.
func (r *Request) Value(key any) any {
	for i := range r.nvals {
		if r.vals[i].key == key {
			return r.vals[i].val
		}
	}
	for i := range r.mvals {
		if r.mvals[i].key == key {
			return r.mvals[i].val
		}
	}
	return nil
}
