package runtime

import (
	"time"

	"github.com/percore/percore/ring"
)

// SetOpenRing replaces how loops open their io_uring, for the fallback
// tests, and returns a function that restores it.
func SetOpenRing(f func(ring.Config) (*ring.Ring, error)) (restore func()) {
	old := openRing
	openRing = f
	return func() { openRing = old }
}

// SetStopWarnEvery changes how often Close warns about a loop that does not
// stop, and returns a function that restores it.
func SetStopWarnEvery(d time.Duration) (restore func()) {
	old := stopWarnEvery
	stopWarnEvery = d
	return func() { stopWarnEvery = old }
}
