//go:build linux

package ring

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Resident returns how many bytes of b's buffers are resident in memory
// (mincore(2), page by page): the pages the kernel has filled since they
// were mapped or last given back (Discard). A receive fills the pages it
// writes, so a plain ring of large buffers that takes small receives keeps
// about a page resident per buffer it has used, and an incremental ring
// every page of the buffers it has cycled through. For measurements; it
// costs a system call and a byte per page.
func (b *BufRing) Resident() (int, error) {
	page := os.Getpagesize()
	vec := make([]byte, (len(b.bufMem)+page-1)/page)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b.bufMem[0])), uintptr(len(b.bufMem)),
		uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		return 0, os.NewSyscallError("mincore", errno)
	}
	n := 0
	for _, v := range vec {
		if v&1 != 0 {
			n++
		}
	}
	return n * page, nil
}
