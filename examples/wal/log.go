//go:build linux

package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The log on disk: segments named wal-NNNNNNNNNNNN.log in one directory,
// in order, each a run of records
//
//	length  uint32, big-endian: the payload's length
//	crc     uint32, big-endian: CRC-32C (Castagnoli) of the length's 4 bytes and the payload
//	payload length bytes
//
// A record's log sequence number (LSN) is its index in the whole log,
// from 0. A segment may end in preallocated zeros (fallocate): a zero
// header there is the clean end of the data, not a torn record (the CRC
// of a zero length is not zero, so no real record has an all-zero
// header).

const (
	recordHeader = 8
	segPrefix    = "wal-"
	segSuffix    = ".log"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendRecord appends payload as a record to dst.
func appendRecord(dst, payload []byte) []byte {
	var h [recordHeader]byte
	binary.BigEndian.PutUint32(h[:4], uint32(len(payload)))
	crc := crc32.Update(crc32.Checksum(h[:4], castagnoli), castagnoli, payload)
	binary.BigEndian.PutUint32(h[4:], crc)
	return append(append(dst, h[:]...), payload...)
}

// segName returns the name of segment n.
func segName(n uint64) string { return fmt.Sprintf("%s%012d%s", segPrefix, n, segSuffix) }

// segments returns the segment numbers in dir, in order.
func segments(dir string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var nums []uint64
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, segPrefix) || !strings.HasSuffix(name, segSuffix) {
			continue
		}
		var n uint64
		if _, err := fmt.Sscanf(strings.TrimSuffix(strings.TrimPrefix(name, segPrefix), segSuffix), "%d", &n); err != nil {
			continue
		}
		nums = append(nums, n)
	}
	slices.Sort(nums)
	return nums, nil
}

// scanResult is what scanning one segment found.
type scanResult struct {
	records int
	good    int64  // the end of the last intact record
	size    int64  // the segment's size
	torn    string // why the data ended before size, if it did ("" for a clean end)
}

// scanSegment reads the records of one segment, calling each (if not nil)
// with every intact payload, and stops at the first record that is not
// intact: a header or payload cut short (a torn length reads as one past
// the segment's end), or a bad CRC. A zero header (preallocated space)
// ends the data cleanly. The checksum alone says a record is whole: no
// size limit applies here, so that a record accepted under a larger
// -max-record than today's is kept (the limit bounds new records only).
func scanSegment(name string, each func(payload []byte)) (scanResult, error) {
	f, err := os.Open(name)
	if err != nil {
		return scanResult{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return scanResult{}, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return scanResult{}, err
	}
	r := scanResult{size: fi.Size()}
	off := 0
	for off < len(data) {
		rest := data[off:]
		if len(rest) < recordHeader {
			if allZero(rest) {
				break
			}
			r.torn = fmt.Sprintf("a header cut short at offset %d", off)
			break
		}
		n := binary.BigEndian.Uint32(rest[:4])
		crc := binary.BigEndian.Uint32(rest[4:8])
		if n == 0 && crc == 0 {
			if !allZero(rest) {
				r.torn = fmt.Sprintf("a zero header followed by data at offset %d", off)
			}
			break
		}
		if int64(len(rest)) < recordHeader+int64(n) {
			r.torn = fmt.Sprintf("a record of %d bytes cut short at offset %d", n, off)
			break
		}
		payload := rest[recordHeader : recordHeader+int(n)]
		if crc32.Update(crc32.Checksum(rest[:4], castagnoli), castagnoli, payload) != crc {
			r.torn = fmt.Sprintf("a bad CRC at offset %d", off)
			break
		}
		if each != nil {
			each(payload)
		}
		r.records++
		off += recordHeader + int(n)
	}
	r.good = int64(off)
	return r, nil
}

func allZero(p []byte) bool {
	for _, b := range p {
		if b != 0 {
			return false
		}
	}
	return true
}

// recovery is what recoverLog found and did.
type recovery struct {
	segments  int
	records   uint64 // intact records: the next LSN
	last      uint64 // the last segment's number (0 with none)
	lastSize  int64  // its data's end: where appends go on
	truncated int64  // bytes cut from the last segment's tail
	torn      string // why, if a torn tail was cut
}

func (r recovery) String() string {
	s := fmt.Sprintf("recovered %d records in %d segments", r.records, r.segments)
	if r.torn != "" {
		s += fmt.Sprintf("; truncated a torn tail of %d bytes (%s) from %s", r.truncated, r.torn, segName(r.last))
	}
	return s
}

// errCorrupt is a record that is not intact in a segment other than the
// last: not a torn tail (only the last segment is ever being written), so
// recovery refuses to guess.
var errCorrupt = errors.New("corrupt record before the last segment")

// recoverLog scans the log in dir, keeps every intact record, and cuts a
// torn tail from the last segment (and the preallocated zeros after the
// data, which the server allocates again). each, if not nil, sees every
// intact payload in order. Whether a record is intact is the checksum's
// say alone, whatever its size.
func recoverLog(dir string, each func(payload []byte)) (recovery, error) {
	nums, err := segments(dir)
	if err != nil {
		return recovery{}, err
	}
	var r recovery
	for i, n := range nums {
		name := filepath.Join(dir, segName(n))
		s, err := scanSegment(name, each)
		if err != nil {
			return r, err
		}
		r.segments++
		r.records += uint64(s.records)
		r.last, r.lastSize = n, s.good
		if i < len(nums)-1 {
			if s.torn != "" {
				return r, fmt.Errorf("%s: %s: %w", name, s.torn, errCorrupt)
			}
			continue
		}
		if s.good < s.size {
			if s.torn != "" {
				r.torn, r.truncated = s.torn, s.size-s.good
			}
			if err := os.Truncate(name, s.good); err != nil {
				return r, err
			}
			if err := syncFile(name); err != nil {
				return r, err
			}
		}
	}
	return r, nil
}

func syncFile(name string) error {
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
