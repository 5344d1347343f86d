//go:build race

package runtime_test

// raceEnabled: under -race, x/sys/unix's Read and Write (an eventfd's
// wake-up) make their buffer escape, so a wake-up allocates.
const raceEnabled = true
