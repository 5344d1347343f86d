//go:build linux && !race

package httpd_test

const raceEnabled = false
