//go:build linux

package main

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
)

// walConfig is the server's configuration.
type walConfig struct {
	dir       string
	sync      bool  // acknowledge after fdatasync (else after the write)
	depth     int   // groups written and synced at once, at most
	segSize   int64 // rotate past this size
	prealloc  bool  // fallocate each segment to segSize
	maxRecord int
	maxGroup  int // bytes a group may grow to before reading pauses
}

// walServer is the log on its one loop: the group being gathered, the
// groups written (and synced) in flight, in order, and the segment they go
// to. Everything runs on the loop's thread.
type walServer struct {
	cfg walConfig
	l   *percore.Loop
	log *slog.Logger

	dir    *percore.File
	seg    *percore.File
	segNum uint64
	off    int64 // where the next group goes in seg

	next     uint64 // the LSN of the next record
	cur      *group
	inflight []*group
	spare    []*group
	armed    bool // a flush is scheduled for this turn's end
	rotating bool
	failed   error
	paused   []*percore.Conn // reading paused while the group is at maxGroup

	records, syncs, groups, maxSeen uint64
}

// group is the records gathered for one write (and one fdatasync), and
// whom to acknowledge when it is durable.
type group struct {
	buf     []byte
	waiters []waiter
	done    bool
	err     error
}

type waiter struct {
	c   *percore.Conn
	lsn uint64
}

// start opens the log's directory and its last segment (or its first) on
// the loop; records that arrive meanwhile wait in the first group.
func (s *walServer) start(l *percore.Loop, rec recovery) {
	s.l = l
	s.next = rec.records
	s.cur = s.newGroup()
	l.OpenFile(s.cfg.dir, os.O_RDONLY|syscall.O_DIRECTORY, 0, func(d *percore.File, err error) {
		if err != nil {
			s.fail(err)
			return
		}
		s.dir = d
		if rec.segments == 0 {
			s.openSegment(1, true)
			return
		}
		s.segNum, s.off = rec.last, rec.lastSize
		s.openSegment(rec.last, false)
	})
}

// openSegment opens segment n (creating it when fresh), preallocates it,
// and makes a new segment's directory entry durable before any record
// goes into it.
func (s *walServer) openSegment(n uint64, fresh bool) {
	flag := os.O_RDWR
	if fresh {
		flag |= os.O_CREATE | os.O_EXCL
	}
	s.rotating = true
	s.l.OpenFileAt(s.dir, segName(n), flag, 0o644, func(f *percore.File, err error) {
		if err != nil {
			s.fail(err)
			return
		}
		s.seg, s.segNum = f, n
		if fresh {
			s.off = 0
		}
		s.preallocate(func() {
			if !fresh {
				s.opened()
				return
			}
			s.dir.Sync(func(err error) {
				if err != nil {
					s.fail(err)
					return
				}
				s.opened()
			})
		})
	})
}

// preallocate reserves the segment's blocks (and size), so that an
// fdatasync after a write into it has no file size to commit. A file
// system without fallocate goes without.
func (s *walServer) preallocate(then func()) {
	if !s.cfg.prealloc {
		then()
		return
	}
	s.seg.Allocate(0, 0, s.cfg.segSize, func(err error) {
		if err != nil && !isUnsupported(err) {
			s.fail(err)
			return
		}
		then()
	})
}

func isUnsupported(err error) bool {
	var errno syscall.Errno
	if pe, ok := err.(*os.PathError); ok {
		errno, _ = pe.Err.(syscall.Errno)
	}
	return errno == syscall.EOPNOTSUPP || errno == syscall.ENOTSUP
}

func (s *walServer) opened() {
	s.rotating = false
	s.flush()
}

func (s *walServer) newGroup() *group {
	if n := len(s.spare); n > 0 {
		g := s.spare[n-1]
		s.spare = s.spare[:n-1]
		return g
	}
	return &group{}
}

// OnFrame takes one record: it joins the group being gathered, which is
// written once the loop's turn has handled every completion that arrived
// with it.
func (s *walServer) OnFrame(c *percore.Conn, payload []byte) {
	if s.failed != nil {
		c.Close()
		return
	}
	g := s.cur
	g.buf = appendRecord(g.buf, payload)
	g.waiters = append(g.waiters, waiter{c, s.next})
	s.next++
	c.BeginRequest() // a graceful shutdown waits for its acknowledgement
	if len(g.buf) >= s.cfg.maxGroup {
		frame.PauseRead(c)
		s.paused = append(s.paused, c)
	}
	if !s.armed {
		s.armed = true
		s.l.AfterFunc(0, s.flush) // after this turn's completions
	}
}

// flush starts the write of the gathered group, unless the pipeline is
// full, the segment is being rotated, or nothing is gathered.
func (s *walServer) flush() {
	s.armed = false
	g := s.cur
	if s.failed != nil || s.seg == nil || s.rotating || len(g.waiters) == 0 || len(s.inflight) >= s.cfg.depth {
		return
	}
	if s.off > 0 && s.off+int64(len(g.buf)) > s.cfg.segSize {
		if len(s.inflight) == 0 {
			s.rotate()
		}
		return // once the groups in flight are durable
	}
	s.cur = s.newGroup()
	s.inflight = append(s.inflight, g)
	off := s.off
	s.off += int64(len(g.buf))
	s.groups++
	s.records += uint64(len(g.waiters))
	s.maxSeen = max(s.maxSeen, uint64(len(g.waiters)))
	done := func(n int, err error) {
		g.done, g.err = true, err
		s.acknowledge()
		s.flush()
	}
	if s.cfg.sync {
		s.seg.WriteAtSync(g.buf, off, done)
	} else {
		s.seg.WriteAt(g.buf, off, done)
	}
	for _, c := range s.paused {
		frame.ResumeRead(c)
	}
	clear(s.paused)
	s.paused = s.paused[:0]
}

// acknowledge answers, in order, the records of every group at the head of
// the pipeline that is done: each with its LSN.
func (s *walServer) acknowledge() {
	for len(s.inflight) > 0 && s.inflight[0].done {
		g := s.inflight[0]
		s.inflight[0] = nil
		s.inflight = s.inflight[1:]
		if g.err != nil && s.failed == nil {
			s.fail(g.err)
		}
		if s.cfg.sync && g.err == nil {
			s.syncs++
		}
		var ack [8]byte
		for i, w := range g.waiters {
			g.waiters[i] = waiter{}
			if s.failed != nil {
				w.c.Close() // not durable: the client must not take it as acknowledged
				w.c.EndRequest()
				continue
			}
			binary.BigEndian.PutUint64(ack[:], w.lsn)
			w.c.Write(ack[:])
			w.c.EndRequest()
		}
		g.buf, g.waiters, g.done, g.err = g.buf[:0], g.waiters[:0], false, nil
		s.spare = append(s.spare, g)
	}
}

// rotate closes the full segment and opens the next one.
func (s *walServer) rotate() {
	s.rotating = true
	old := s.seg
	s.seg = nil
	old.Close(func(err error) {
		if err != nil {
			s.fail(err)
			return
		}
		s.openSegment(s.segNum+1, true)
	})
}

// fail stops the log for good: after a failed write or sync the state of
// the file is unknown (a failed fsync may have dropped the dirty pages),
// so nothing more is acknowledged, and every client waiting is closed.
func (s *walServer) fail(err error) {
	if s.failed != nil {
		return
	}
	s.failed = fmt.Errorf("log %s failed, no record is acknowledged from now on: %w", filepath.Join(s.cfg.dir, segName(s.segNum)), err)
	s.log.Error("wal: " + s.failed.Error())
	for _, w := range s.cur.waiters {
		w.c.Close()
		w.c.EndRequest()
	}
	s.cur.waiters = s.cur.waiters[:0]
}

// stats is the server's counters, read on its loop.
func (s *walServer) stats() string {
	perSync := 0.0
	if s.groups > 0 {
		perSync = float64(s.records) / float64(s.groups)
	}
	return fmt.Sprintf("records=%d groups=%d syncs=%d records/group=%.2f max-group=%d next-lsn=%d",
		s.records, s.groups, s.syncs, perSync, s.maxSeen, s.next)
}
