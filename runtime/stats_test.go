package runtime_test

import (
	"sync"
	"testing"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// TestOnPublish: the functions registered with Loop.OnPublish run at the
// end of the loop's turns, and once more after the OnStop functions when it
// stops, where what they publish is final (a pool's
// Local counts its connections closed in OnStop and publishes that).
func TestOnPublish(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := pctest.Start(t, percore.Config{Backend: b}, nil)
		l := rt.Loops()[0]
		var mu sync.Mutex
		var events []string
		record := func(e string) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}
		count := func() int {
			mu.Lock()
			defer mu.Unlock()
			n := 0
			for _, e := range events {
				if e == "publish" {
					n++
				}
			}
			return n
		}
		pctest.OnLoop(t, l, func() {
			l.OnPublish(func() { record("publish") })
			l.OnStop(func() { record("stop") })
		})
		for range 3 {
			before := count()
			pctest.OnLoop(t, l, func() {}) // a turn
			pctest.WaitFor(t, "a publication after the turn", func() bool { return count() > before })
		}
		rt.Close()
		mu.Lock()
		defer mu.Unlock()
		if n := len(events); n < 2 || events[n-2] != "stop" || events[n-1] != "publish" {
			t.Fatalf("events end with %q, want the OnStop function, then one publication", events[max(0, len(events)-3):])
		}
	})
}
