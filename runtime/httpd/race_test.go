//go:build linux && race

package httpd_test

// raceEnabled: allocation counts differ under -race (sync.Pool drops what
// is put back at random, by design).
const raceEnabled = true
