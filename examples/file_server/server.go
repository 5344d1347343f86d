//go:build linux

package main

import (
	"errors"
	"io"
	"io/fs"
	"mime"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
	"github.com/percore/percore/runtime/frame/http1"
)

// fileServer serves the files under one directory over HTTP/1.1 GET and
// HEAD. Each loop has the directory open as a File of its own (roots); a
// request's name is opened beneath it (openat2 with RESOLVE_BENEATH, so
// that neither "..", an absolute name nor a symbolic link can leave it),
// stated, and its bytes sent with Conn.SendFile (splice on io_uring,
// sendfile on epoll). A connection serves one request at a time: reading
// pauses from a request's end until its response is sent, and pipelined
// requests wait in the connection's input.
type fileServer struct {
	roots percore.PerLoop[*percore.File]
	// small is the largest file answered from one read and one write
	// (0: every file goes through Conn.SendFile).
	small int
}

var (
	_ frame.ViewHandler = (*fileServer)(nil)
)

func (s *fileServer) OnView(c *percore.Conn, in []byte) (int, error) {
	r, _ := c.Value().(*request)
	if r == nil {
		r = &request{}
		c.SetValue(r)
	}
	off := 0
	for {
		n, ev, _, err := r.d.Next(in[off:])
		off += n
		var he *http1.Error
		switch {
		case errors.As(err, &he):
			c.Write(http1.AppendError(r.out[:0], he.Status, he.Reason, r.date.Get(c.Loop().Now())))
			c.Close()
			return off, nil
		case err != nil:
			return off, err
		case ev == http1.Head:
			r.begin(r.d.Request())
		case ev == http1.End:
			frame.PauseRead(c)
			s.serve(c, r)
			return off, nil
		case ev == http1.NeedMore:
			return off, nil
		}
	}
}

// serve answers a whole request.
func (s *fileServer) serve(c *percore.Conn, r *request) {
	switch {
	case r.bad != 0:
		s.fail(c, r, r.bad)
		return
	case r.method != 0:
		s.fail(c, r, r.method)
		return
	}
	l := c.Loop()
	root := *s.roots.Get(l)
	l.OpenFileBeneath(root, string(r.name), os.O_RDONLY, 0, func(f *percore.File, err error) {
		if err != nil {
			s.fail(c, r, openStatus(err))
			return
		}
		if c.Closed() {
			f.Close(nil)
			return
		}
		if !r.head && len(r.rng) == 0 && s.small > 0 {
			s.readSmall(c, r, f)
			return
		}
		s.statAndSend(c, r, f)
	})
}

// readSmall reads up to s.small bytes of the file: a file that fits (the
// read ends at its end) is answered from them with one write, without a
// stat or a second operation; a larger one is stated and sent.
func (s *fileServer) readSmall(c *percore.Conn, r *request, f *percore.File) {
	f.ReadAt(0, s.small, func(data []byte, err error) {
		switch {
		case c.Closed():
			f.Close(nil)
		case err == nil:
			s.statAndSend(c, r, f) // it filled the buffer: more may follow
		case err != io.EOF:
			f.Close(nil)
			s.fail(c, r, readStatus(err))
		default:
			f.Close(nil)
			b := http1.AppendStatusLine(r.out[:0], 200)
			b = append(b, "Accept-Ranges: bytes\r\n"...)
			r.out = s.contentType(b, f.Name())
			s.finishHead(c, r, int64(len(data)), data)
			s.done(c, r)
		}
	})
}

// readStatus is the status of a file that could not be read: a directory
// is forbidden, anything else is the server's error.
func readStatus(err error) int {
	if errors.Is(err, syscall.EISDIR) {
		return 403
	}
	return 500
}

// statAndSend states the file and sends it.
func (s *fileServer) statAndSend(c *percore.Conn, r *request, f *percore.File) {
	f.Stat(func(fi fs.FileInfo, err error) {
		switch {
		case c.Closed():
			f.Close(nil)
		case err != nil:
			f.Close(nil)
			s.fail(c, r, 500)
		case !fi.Mode().IsRegular():
			f.Close(nil)
			s.fail(c, r, 403)
		default:
			s.send(c, r, f, fi)
		}
	})
}

// openStatus is the status of a name that could not be opened.
func openStatus(err error) int {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.ENAMETOOLONG):
		return 404
	case errors.Is(err, syscall.EXDEV), errors.Is(err, syscall.ELOOP), errors.Is(err, fs.ErrPermission):
		return 403 // out of the root, a link loop, or no permission
	}
	return 500
}

// send writes the head and sends the file (or its one range).
func (s *fileServer) send(c *percore.Conn, r *request, f *percore.File, fi fs.FileInfo) {
	size := fi.Size()
	off, n, status := int64(0), size, 200
	if len(r.rng) > 0 && !r.head {
		var ok bool
		if off, n, ok = parseRange(r.rng, size); !ok {
			f.Close(nil)
			b := http1.AppendStatusLine(r.out[:0], 416)
			b = append(b, "Content-Range: bytes */"...)
			b = strconv.AppendInt(b, size, 10)
			b = append(b, "\r\n"...)
			r.out = b
			s.finishHead(c, r, 0, nil)
			s.done(c, r)
			return
		}
		if off != 0 || n != size {
			status = 206
		}
	}
	b := http1.AppendStatusLine(r.out[:0], status)
	if status == 206 {
		b = append(b, "Content-Range: bytes "...)
		b = strconv.AppendInt(b, off, 10)
		b = append(b, '-')
		b = strconv.AppendInt(b, off+n-1, 10)
		b = append(b, '/')
		b = strconv.AppendInt(b, size, 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "Accept-Ranges: bytes\r\n"...)
	r.out = s.contentType(b, fi.Name())
	s.finishHead(c, r, n, nil)
	if r.head || n == 0 {
		f.Close(nil)
		s.done(c, r)
		return
	}
	err := c.SendFile(f, off, n, func(_ int64, err error) {
		f.Close(nil)
		if err == nil {
			s.done(c, r)
		}
	})
	if err != nil {
		f.Close(nil)
	}
}

// contentType adds the Content-Type of name's extension, if it has one.
func (s *fileServer) contentType(b []byte, name string) []byte {
	if ct := mime.TypeByExtension(filepath.Ext(name)); ct != "" {
		b = http1.AppendHeader(b, "Content-Type", []byte(ct))
	}
	return b
}

// finishHead adds the framing to the head in r.out and writes it, with
// body (which may be nil) in the same write.
func (s *fileServer) finishHead(c *percore.Conn, r *request, n int64, body []byte) {
	b := http1.AppendHeader(r.out, "Date", r.date.Get(c.Loop().Now()))
	b = http1.AppendContentLength(b, n)
	if r.close {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "\r\n"...)
	r.out = b
	c.Writev(b, body)
}

// fail answers with an error status.
func (s *fileServer) fail(c *percore.Conn, r *request, status int) {
	if c.Closed() {
		return
	}
	b := http1.AppendStatusLine(r.out[:0], status)
	if status == 405 {
		b = append(b, "Allow: GET, HEAD\r\n"...)
	}
	body := strconv.Itoa(status) + " " + http1.StatusText(status) + "\n"
	b = append(b, "Content-Type: text/plain; charset=utf-8\r\n"...)
	b = http1.AppendHeader(b, "Date", r.date.Get(c.Loop().Now()))
	b = http1.AppendContentLength(b, int64(len(body)))
	if r.close {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "\r\n"...)
	if !r.head {
		b = append(b, body...)
	}
	r.out = b
	c.Write(b)
	s.done(c, r)
}

// done ends a response: the connection closes if the request asked, else
// it reads the next request.
func (s *fileServer) done(c *percore.Conn, r *request) {
	if r.close {
		c.Close()
		return
	}
	frame.ResumeRead(c)
}
