package runtime

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

func ptrOf(sa *unix.RawSockaddrAny) unsafe.Pointer { return unsafe.Pointer(sa) }
