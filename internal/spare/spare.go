// Package spare holds what the free lists of spare values share: the
// runtime's (timers, side states, outbound queues, deferred receives),
// httpd's connection states and the WebSocket Pool's side states, each a
// slice of pointers owned by one loop.
package spare

// Pop takes the last of *spares, clearing its place so that the list's
// array keeps no pointer to it, or returns nil when there is none.
func Pop[T any](spares *[]*T) *T {
	s := *spares
	n := len(s)
	if n == 0 {
		return nil
	}
	v := s[n-1]
	s[n-1] = nil
	*spares = s[:n-1]
	return v
}
