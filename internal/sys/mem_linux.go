//go:build linux

package sys

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Map maps n bytes of private anonymous memory, readable and writable.
func Map(n int) ([]byte, error) {
	ptr, err := unix.MmapPtr(-1, 0, nil, uintptr(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(ptr), n), nil
}

// Unmap unmaps what Map mapped; b must be the whole mapping (its capacity
// counts).
func Unmap(b []byte) error {
	b = b[:cap(b)]
	return unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)))
}
