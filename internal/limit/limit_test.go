package limit

import (
	"testing"
	"time"
)

func TestOrDefault(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in, def time.Duration
		want    time.Duration
	}{
		{"zero is the default", 0, time.Second, time.Second},
		{"negative is none", -1, time.Second, 0},
		{"positive is kept", 3, time.Second, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := OrDefault(tc.in, tc.def); got != tc.want {
				t.Errorf("OrDefault(%v, %v) = %v, want %v", tc.in, tc.def, got, tc.want)
			}
		})
	}
	if got := OrDefault(-5, 10); got != 0 {
		t.Errorf("int: %d", got)
	}
}
