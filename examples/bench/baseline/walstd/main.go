//go:build linux

// Command walstd is the std-net baseline of examples/wal for the
// side-by-side benchmark (scripts/bench-wal.sh): the same protocol (records
// framed by a 4-byte big-endian length, each answered with its 8-byte LSN
// once durable) and the same records on disk (length, CRC-32C, payload),
// written the way a Go programmer would write a group-commit server on
// package net: a goroutine per connection that reads a record, hands it to
// the committer over a channel and waits for its reply; one committer
// goroutine that takes every record waiting, writes them in one write,
// fdatasyncs once and answers them all. -group=false is the per-record
// baseline: each connection's goroutine takes a mutex, writes its record
// and fdatasyncs it alone.
package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func appendRecord(dst, payload []byte) []byte {
	var h [8]byte
	binary.BigEndian.PutUint32(h[:4], uint32(len(payload)))
	binary.BigEndian.PutUint32(h[4:], crc32.Update(crc32.Checksum(h[:4], castagnoli), castagnoli, payload))
	return append(append(dst, h[:]...), payload...)
}

// entry is one record on its way to the committer.
type entry struct {
	payload []byte
	done    chan uint64
}

type server struct {
	f      *os.File
	sync   bool
	group  bool
	in     chan entry
	mu     sync.Mutex // per-record mode: one write and sync at a time
	next   uint64
	off    int64
	groups uint64
}

func main() {
	addr := flag.String("addr", "127.0.0.1:7401", "listen address")
	dir := flag.String("dir", "", "the log's directory (required; the log starts empty)")
	doSync := flag.Bool("sync", true, "fdatasync before acknowledging")
	group := flag.Bool("group", true, "group commit (false: one write and fdatasync per record)")
	prealloc := flag.Int64("prealloc", 1<<30, "bytes to fallocate the log to (0: none)")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "walstd: -dir is required")
		os.Exit(2)
	}
	f, err := os.OpenFile(filepath.Join(*dir, "wal-std.log"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "walstd:", err)
		os.Exit(1)
	}
	if *prealloc > 0 {
		_ = unix.Fallocate(int(f.Fd()), 0, 0, *prealloc)
	}
	s := &server{f: f, sync: *doSync, group: *group, in: make(chan entry, 4096)}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "walstd:", err)
		os.Exit(1)
	}
	fmt.Printf("walstd: listening on %s (sync %v, group %v)\n", ln.Addr(), *doSync, *group)
	if s.group {
		go s.commit()
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	s.mu.Lock()
	fmt.Fprintf(os.Stderr, "walstd: records=%d groups=%d\n", s.next, s.groups)
	s.mu.Unlock()
}

// serve reads a connection's records, one at a time, and answers each once
// it is durable.
func (s *server) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	var hdr [4]byte
	ack := make([]byte, 8)
	done := make(chan uint64, 1)
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > 1<<20 {
			return
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(r, p); err != nil {
			return
		}
		var lsn uint64
		if s.group {
			s.in <- entry{p, done}
			lsn = <-done
		} else {
			lsn = s.writeOne(p)
		}
		binary.BigEndian.PutUint64(ack, lsn)
		if _, err := c.Write(ack); err != nil {
			return
		}
	}
}

// writeOne writes and syncs one record under the mutex.
func (s *server) writeOne(p []byte) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := appendRecord(nil, p)
	if _, err := s.f.WriteAt(b, s.off); err != nil {
		panic(err)
	}
	s.off += int64(len(b))
	if s.sync {
		if err := unix.Fdatasync(int(s.f.Fd())); err != nil {
			panic(err)
		}
	}
	s.groups++
	lsn := s.next
	s.next++
	return lsn
}

// commit is the committer: it takes every record waiting, writes them
// together, syncs once, and answers them in order.
func (s *server) commit() {
	var buf []byte
	var batch []entry
	for e := range s.in {
		batch = append(batch[:0], e)
	drain:
		for {
			select {
			case e := <-s.in:
				batch = append(batch, e)
			default:
				break drain
			}
		}
		buf = buf[:0]
		for _, e := range batch {
			buf = appendRecord(buf, e.payload)
		}
		if _, err := s.f.WriteAt(buf, s.off); err != nil {
			panic(err)
		}
		s.off += int64(len(buf))
		if s.sync {
			if err := unix.Fdatasync(int(s.f.Fd())); err != nil {
				panic(err)
			}
		}
		s.mu.Lock()
		for _, e := range batch {
			e.done <- s.next
			s.next++
		}
		s.groups++
		s.mu.Unlock()
	}
}
