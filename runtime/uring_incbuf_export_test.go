package runtime

// RecvParts reports l's record of its incremental receive buffers
// (UringIncrementalBuffers): the parts it holds, the buffers not back with
// the kernel (held by a part, or filled and not yet recycled), how many
// buffers the ring has and how many were recycled; ok is false when l does
// not use the feature. On l's thread.
func RecvParts(l *Loop) (held, out, buffers int, recycled uint64, ok bool) {
	d, isUring := l.d.(*uringDriver)
	if !isUring || d.inc == nil {
		return 0, 0, 0, 0, false
	}
	for _, r := range d.inc.refs {
		if r != 1 {
			out++
		}
	}
	return d.inc.held, out, len(d.inc.refs), d.inc.recycled, true
}

// RecvResident returns how many bytes of l's io_uring receive buffers are
// resident (ring.BufRing.Resident); ok is false on another backend. On
// l's thread.
func RecvResident(l *Loop) (n int, ok bool, err error) {
	d, isUring := l.d.(*uringDriver)
	if !isUring || d.br == nil {
		return 0, false, nil
	}
	n, err = d.br.Resident()
	return n, true, err
}

// CopyHeldParts makes l's deferred receives copy their parts of
// incremental buffers out instead of holding them (incParts.copyHeld), for
// BenchmarkIncrementalHeld's comparison. On l's thread, before its
// connections receive.
func CopyHeldParts(l *Loop) bool {
	d, isUring := l.d.(*uringDriver)
	if !isUring || d.inc == nil {
		return false
	}
	d.inc.copyHeld = true
	return true
}
