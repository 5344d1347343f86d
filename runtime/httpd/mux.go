//go:build linux

package httpd

import (
	"bytes"
	"fmt"
	"path"
	"slices"
	"strings"
)

// Mux routes requests with the patterns of Go 1.22's http.ServeMux:
//
//	[METHOD ]/path
//
// with literal segments, {name} (one segment), {name...} (the rest of the
// path, as the last segment), {$} (the end, after a trailing slash), and
// a trailing slash meaning the path and everything below it. A method of
// GET also matches HEAD; a pattern without one matches every method. Path
// values are unescaped (Request.PathValue); a path that is not clean
// ("//", "/./", "/../") is redirected to its clean form (301), and a path
// whose pattern has a trailing slash it lacks is redirected to it. A path
// that matches with no pattern of its method is answered 405 with Allow.
//
// Where several patterns match, a literal segment wins over {name}, which
// wins over {name...} and a trailing slash, segment by segment from the
// left; within one path, a pattern with the request's method wins over
// one without. That is ServeMux's precedence for every set of patterns
// ServeMux accepts; sets it rejects as conflicting (such as /a/{x} and
// /{y}/b) are accepted here and resolved by that order. Host patterns
// ("example.com/") are not supported: Handle panics on one. Registering
// the same pattern twice panics, as it does for ServeMux.
//
// Routing allocates nothing per request. Register every pattern before
// the server starts; a Mux is then safe for concurrent use.
type Mux struct {
	root   node
	static map[string]*endpoint // the patterns without wildcards, by path
	// NotFound answers a request no pattern matches; nil means a 404
	// with "404 Not Found\n". Set it before the server starts.
	NotFound Handler
}

type node struct {
	lit       map[string]*node
	wild      *node
	wildName  string
	multi     *endpoint // {name...} or a trailing slash
	multiName string
	exact     *endpoint // a pattern ends here
}

type endpoint struct {
	pattern string
	// path is the endpoint's key in Mux.static when it has one without
	// a '%' (a request path equal to it is found there): what a
	// routeCache compares.
	path    string
	methods []methodHandler
	all     methodHandler // the pattern without a method (h nil if none)
	refuse  *statusHandler
	refuseH methodHandler
}

// methodHandler is a route's handler, with what the server asks of it
// found once, at registration.
type methodHandler struct {
	method string
	h      Handler
	sh     StreamHandler
	refuse bool
}

func newMethodHandler(method string, h Handler) methodHandler {
	sh, _ := h.(StreamHandler)
	_, refuse := h.(refuser)
	return methodHandler{method: method, h: h, sh: sh, refuse: refuse}
}

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{} }

// HandleFunc registers f for pattern.
func (m *Mux) HandleFunc(pattern string, f func(w *Response, r *Request)) {
	m.Handle(pattern, HandlerFunc(f))
}

// Handle registers h for pattern. It panics on a malformed pattern or one
// registered already.
func (m *Mux) Handle(pattern string, h Handler) {
	if h == nil {
		panic("httpd: nil handler for " + pattern)
	}
	method, p, _ := strings.Cut(pattern, " ")
	if !strings.Contains(pattern, " ") {
		method, p = "", pattern
	}
	p = strings.TrimLeft(p, " \t")
	if p == "" || p[0] != '/' {
		panic(fmt.Sprintf("httpd: pattern %q: host patterns are not supported, a path must start with '/'", pattern))
	}
	n := &m.root
	segs := strings.Split(p[1:], "/")
	var ep **endpoint
	names := map[string]bool{}
	literal := true
	for i, seg := range segs {
		if strings.ContainsAny(seg, "{}%") && seg != "{$}" || seg == "" && i == len(segs)-1 {
			literal = false
		}
		last := i == len(segs)-1
		switch {
		case seg == "{$}":
			if !last {
				panic(fmt.Sprintf("httpd: pattern %q: {$} must end the pattern", pattern))
			}
			n = n.literal("")
			ep = &n.exact
		case strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "...}"):
			if !last {
				panic(fmt.Sprintf("httpd: pattern %q: {name...} must end the pattern", pattern))
			}
			name := seg[1 : len(seg)-4]
			checkName(pattern, name, names)
			if n.multi != nil && n.multiName != name {
				panic(fmt.Sprintf("httpd: pattern %q conflicts with %q", pattern, n.multi.pattern))
			}
			n.multiName = name
			ep = &n.multi
		case strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}"):
			name := seg[1 : len(seg)-1]
			checkName(pattern, name, names)
			if n.wild == nil {
				n.wild, n.wildName = &node{}, name
			} else if n.wildName != name {
				panic(fmt.Sprintf("httpd: pattern %q: wildcard {%s} where another pattern has {%s}", pattern, name, n.wildName))
			}
			n = n.wild
			if last {
				ep = &n.exact
			}
		case strings.ContainsAny(seg, "{}"):
			panic(fmt.Sprintf("httpd: pattern %q: a wildcard must be a whole segment", pattern))
		case seg == "" && last:
			// A trailing slash: this path and everything below.
			ep = &n.multi
		default:
			n = n.literal(unescapeLiteral(seg))
			if last {
				ep = &n.exact
			}
		}
	}
	if *ep == nil {
		*ep = &endpoint{pattern: pattern}
	}
	e := *ep
	if method == "" {
		if e.all.h != nil {
			panic(fmt.Sprintf("httpd: pattern %q registered twice", pattern))
		}
		e.all = newMethodHandler("", h)
	} else {
		for _, mh := range e.methods {
			if mh.method == method {
				panic(fmt.Sprintf("httpd: pattern %q registered twice", pattern))
			}
		}
		e.methods = append(e.methods, newMethodHandler(method, h))
	}
	if literal {
		// A path of literal segments only: found with one lookup. It
		// is also the most specific match the tree could give.
		if m.static == nil {
			m.static = map[string]*endpoint{}
		}
		key := strings.ReplaceAll(p, "{$}", "")
		m.static[key] = e
		if !strings.Contains(key, "%") {
			e.path = key
		}
	}
	e.refuse = &statusHandler{status: 405, body: "405 Method Not Allowed\n", allow: e.allow()}
	e.refuseH = newMethodHandler("", e.refuse)
}

func checkName(pattern, name string, seen map[string]bool) {
	if name == "" || name == "$" {
		panic(fmt.Sprintf("httpd: pattern %q: a wildcard needs a name", pattern))
	}
	if seen[name] {
		panic(fmt.Sprintf("httpd: pattern %q: wildcard {%s} twice", pattern, name))
	}
	seen[name] = true
}

func unescapeLiteral(s string) string {
	var r Request
	d, ok := r.unescape([]byte(s), false)
	if !ok {
		return s
	}
	return string(d)
}

func (n *node) literal(seg string) *node {
	if n.lit == nil {
		n.lit = map[string]*node{}
	}
	c := n.lit[seg]
	if c == nil {
		c = &node{}
		n.lit[seg] = c
	}
	return c
}

// allow lists the endpoint's methods for a 405's Allow field.
func (e *endpoint) allow() string {
	var ms []string
	for _, mh := range e.methods {
		ms = append(ms, mh.method)
		if mh.method == "GET" && !slices.ContainsFunc(e.methods, func(x methodHandler) bool { return x.method == "HEAD" }) {
			ms = append(ms, "HEAD")
		}
	}
	return strings.Join(ms, ", ")
}

// handler returns the endpoint's handler for method, or nil.
func (e *endpoint) handler(method []byte) *methodHandler {
	for i := range e.methods {
		if e.methods[i].method == string(method) {
			return &e.methods[i]
		}
	}
	if string(method) == "HEAD" {
		for i := range e.methods {
			if e.methods[i].method == "GET" {
				return &e.methods[i]
			}
		}
	}
	if e.all.h != nil {
		return &e.all
	}
	return nil
}

// ServeHTTP routes the request and calls its handler.
func (m *Mux) ServeHTTP(w *Response, r *Request) { m.Route(r).ServeHTTP(w, r) }

// Route returns the handler for r, with r's path parameters set: a
// registered handler, or one that answers 404, 405 or a redirect.
func (m *Mux) Route(r *Request) Handler { return m.route(r, nil).h }

// route is Route with what the server asks of the handler.
func (m *Mux) route(r *Request, rc *routeCache) *methodHandler {
	p := r.path
	if rc != nil && rc.mh != nil && rc.hit(p, r.hr.Method) {
		return rc.mh
	}
	if len(p) == 0 || p[0] != '/' {
		return m.notFound()
	}
	if m.static != nil && bytes.IndexByte(p, '%') < 0 {
		if e := m.static[string(p)]; e != nil {
			if mh := e.handler(r.hr.Method); mh != nil {
				if rc != nil && e.path != "" && mh.method == string(r.hr.Method) {
					*rc = routeCache{path: e.path, method: mh.method, mh: mh}
				}
				return mh
			}
		}
	}
	if needsClean(p) {
		return redirectTo(cleanPath(string(p)), r.query)
	}
	var st matchState
	if h := m.match(&m.root, p[1:], true, r, &st); h != nil {
		return h
	}
	if st.refuse != nil {
		return st.refuse
	}
	if p[len(p)-1] != '/' {
		// A subtree pattern the path lacks the slash of: redirect.
		var probe Request
		probe.hr = r.hr
		withSlash := string(p) + "/"
		var st2 matchState
		if m.match(&m.root, []byte(withSlash)[1:], true, &probe, &st2) != nil || st2.refuse != nil {
			return redirectTo(withSlash, r.query)
		}
	}
	return m.notFound()
}

// routeCache is a connection's last route found in Mux.static with its
// method, kept for the next request: the requests of a connection (and
// of a pipelined read) mostly ask for one path, which is then found with
// two comparisons instead of a map lookup. Only such routes are kept: a
// path equal to e.path is one the map would find, with the same handler
// for the same method, and the Mux does not change once serving.
type routeCache struct {
	path   string // the endpoint's (endpoint.path)
	method string // mh's
	mh     *methodHandler
}

// hit reports whether path and method are the kept route's: compared
// here, without a call, as they are short.
func (rc *routeCache) hit(path, method []byte) bool {
	if len(path) != len(rc.path) || len(method) != len(rc.method) {
		return false
	}
	for i := range method {
		if method[i] != rc.method[i] {
			return false
		}
	}
	return string(path) == rc.path
}

type matchState struct {
	refuse *methodHandler // the 405 of the most specific path match without the method
}

// match walks the tree from n over rest, the path after a slash (more
// says whether there is such a segment at all).
func (m *Mux) match(n *node, rest []byte, more bool, r *Request, st *matchState) *methodHandler {
	if !more {
		return m.at(n.exact, r, st)
	}
	seg, tail, more2 := rest, []byte(nil), false
	for i, c := range rest {
		if c == '/' {
			seg, tail, more2 = rest[:i], rest[i+1:], true
			break
		}
	}
	if n.lit != nil {
		key := seg
		if d, ok := r.unescape(seg, false); ok {
			key = d
		}
		if c := n.lit[string(key)]; c != nil {
			if h := m.match(c, tail, more2, r, st); h != nil {
				return h
			}
		}
	}
	if n.wild != nil && len(seg) > 0 {
		mark := r.paramMark()
		v, ok := r.unescape(seg, false)
		if ok {
			r.setParam(n.wildName, v)
			if h := m.match(n.wild, tail, more2, r, st); h != nil {
				return h
			}
		}
		r.paramReset(mark)
	}
	if n.multi != nil {
		mark := r.paramMark()
		if n.multiName != "" {
			v, ok := r.unescape(rest, false)
			if !ok {
				return nil
			}
			r.setParam(n.multiName, v)
		}
		if h := m.at(n.multi, r, st); h != nil {
			return h
		}
		r.paramReset(mark)
	}
	return nil
}

// at returns e's handler for the request's method, noting a 405 when e
// has none for it.
func (m *Mux) at(e *endpoint, r *Request, st *matchState) *methodHandler {
	if e == nil {
		return nil
	}
	if h := e.handler(r.hr.Method); h != nil {
		return h
	}
	if st.refuse == nil {
		st.refuse = &e.refuseH
	}
	return nil
}

func (m *Mux) notFound() *methodHandler {
	if m.NotFound != nil {
		mh := newMethodHandler("", m.NotFound)
		return &mh
	}
	return &notFoundH
}

// needsClean reports whether p has an empty segment before its end, or a
// "." or ".." segment.
func needsClean(p []byte) bool {
	rest := p[1:]
	for {
		i := bytes.IndexByte(rest, '/')
		seg := rest
		if i >= 0 {
			seg = rest[:i]
		}
		if (i >= 0 && len(seg) == 0) || string(seg) == "." || string(seg) == ".." {
			return true
		}
		if i < 0 {
			return false
		}
		rest = rest[i+1:]
	}
}

// cleanPath is path.Clean keeping a trailing slash.
func cleanPath(p string) string {
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c
}

// statusHandler answers a fixed status: 404, 405 (with Allow), a
// redirect.
type statusHandler struct {
	status   int
	body     string
	allow    string
	location string
}

func (h *statusHandler) refuses() {}

// ServeHTTP writes the answer.
func (h *statusHandler) ServeHTTP(w *Response, r *Request) {
	w.WriteHeader(h.status)
	w.AddHeader("Content-Type", "text/plain")
	if h.allow != "" {
		w.AddHeader("Allow", h.allow)
	}
	if h.location != "" {
		w.AddHeader("Location", h.location)
	}
	w.ContentLength(int64(len(h.body)))
	w.WriteString(h.body)
}

// OnBody and OnEnd make the refusals StreamHandlers: their answer is
// written at the head and the body, if any, is dropped, not held.
func (h *statusHandler) OnBody(*Response, *Request, []byte) {}

// OnEnd does nothing: the answer was written at the head.
func (h *statusHandler) OnEnd(*Response, *Request) {}

var notFoundH = newMethodHandler("", &statusHandler{status: 404, body: "404 Not Found\n"})

func redirectTo(p string, query []byte) *methodHandler {
	loc := p
	if len(query) > 0 {
		loc += "?" + string(query)
	}
	mh := newMethodHandler("", &statusHandler{status: 301, body: "301 Moved Permanently\n", location: loc})
	return &mh
}
