//go:build linux

package runtime

import (
	"io/fs"
	"time"

	"golang.org/x/sys/unix"
)

// fileStat is fs.FileInfo from statx.
type fileStat struct {
	name string
	st   unix.Statx_t
}

func newFileStat(name string, st *unix.Statx_t) *fileStat {
	return &fileStat{name: name, st: *st}
}

func (s *fileStat) Name() string { return s.name }
func (s *fileStat) Size() int64  { return int64(s.st.Size) }
func (s *fileStat) ModTime() time.Time {
	return time.Unix(s.st.Mtime.Sec, int64(s.st.Mtime.Nsec))
}
func (s *fileStat) IsDir() bool { return s.Mode().IsDir() }
func (s *fileStat) Sys() any    { return &s.st }

// Mode converts the kernel's mode bits as package os does.
func (s *fileStat) Mode() fs.FileMode {
	m := fs.FileMode(s.st.Mode & 0o777)
	switch s.st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		m |= fs.ModeDevice
	case unix.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFDIR:
		m |= fs.ModeDir
	case unix.S_IFIFO:
		m |= fs.ModeNamedPipe
	case unix.S_IFLNK:
		m |= fs.ModeSymlink
	case unix.S_IFSOCK:
		m |= fs.ModeSocket
	}
	if s.st.Mode&unix.S_ISGID != 0 {
		m |= fs.ModeSetgid
	}
	if s.st.Mode&unix.S_ISUID != 0 {
		m |= fs.ModeSetuid
	}
	if s.st.Mode&unix.S_ISVTX != 0 {
		m |= fs.ModeSticky
	}
	return m
}
