//go:build linux

package main

import "testing"

// TestReturnAfterStorm: -return-after keeps its meaning in the runtime's
// terms: 0 is never (negative there), and a count is the storm's size.
func TestReturnAfterStorm(t *testing.T) {
	for _, tt := range []struct {
		flag uint64
		want int
	}{
		{0, -1},
		{1, 1},
		{1000, 1000},
		{1 << 40, 1<<31 - 1},
	} {
		if got := returnAfterStorm(tt.flag); got != tt.want {
			t.Errorf("returnAfterStorm(%d) = %d; want %d", tt.flag, got, tt.want)
		}
	}
}
