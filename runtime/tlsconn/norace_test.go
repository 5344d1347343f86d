//go:build !race

package tlsconn_test

const raceEnabled = false
