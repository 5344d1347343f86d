//go:build race

package main

// raceEnabled: under -race, x/sys/unix's Read and Write (an eventfd's
// wake-up, as a cross-loop call makes on epoll) make their buffer escape,
// so a wake-up allocates.
const raceEnabled = true
