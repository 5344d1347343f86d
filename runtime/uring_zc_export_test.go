package runtime

// ZeroCopyHeld returns how many zero-copy sends of l's io_uring driver
// still wait for a completion or their notification (of connections, and
// datagram send slots), and the bytes of the buffers connections' sends
// hold (0, 0 on epoll). Read it on l's thread, or once l has exited.
func ZeroCopyHeld(l *Loop) (sends, bytes int) {
	d, ok := l.d.(*uringDriver)
	if !ok {
		return 0, 0
	}
	sends = len(d.zc.sends) - len(d.zc.free)
	for _, s := range d.pk.sends {
		if s.zc {
			sends++
		}
	}
	return sends, d.zc.pinned
}

// ZeroCopyAbandoned returns the bytes of the buffers that loops which
// exited before the kernel was done with them left kept (abandon).
func ZeroCopyAbandoned() int {
	zcAbandoned.Lock()
	defer zcAbandoned.Unlock()
	return zcAbandoned.bytes
}
