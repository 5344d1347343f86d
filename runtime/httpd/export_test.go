//go:build linux

package httpd

import percore "github.com/percore/percore/runtime"

// CommitCounts returns, read on l's thread, how many Commits of answers
// written in place the server made on l, and how many reads (OnView calls)
// answered something in place.
func (s *Server) CommitCounts(l *percore.Loop) (commits, reads uint64) {
	ch := make(chan [2]uint64, 1)
	if err := l.Post(func() {
		ls := s.loopOf(l)
		ch <- [2]uint64{ls.commits, ls.views}
	}); err != nil {
		panic(err)
	}
	v := <-ch
	return v[0], v[1]
}

// SpareCount returns, read on l's thread, how many states of upgraded
// connections l keeps for new ones.
func (s *Server) SpareCount(l *percore.Loop) int {
	ch := make(chan int, 1)
	if err := l.Post(func() { ch <- len(s.loopOf(l).spare) }); err != nil {
		panic(err)
	}
	return <-ch
}

// FreeBufs returns, read on l's thread, how many buffers for heads and
// bodies that span reads l keeps.
func (s *Server) FreeBufs(l *percore.Loop) int {
	ch := make(chan int, 1)
	if err := l.Post(func() { ch <- len(s.loopOf(l).free) }); err != nil {
		panic(err)
	}
	return <-ch
}
