package runtime_test

import (
	"testing"

	percore "github.com/percore/percore/runtime"
)

func TestParseRingFlags(t *testing.T) {
	tests := []struct {
		name, in string
		want     percore.RingFlags
		bad      bool
	}{
		{"empty is the default", "", percore.DefaultRingFlags, false},
		{"default", "default", percore.DefaultRingFlags, false},
		{"none", "none", 0, false},
		{"kernel names", "IORING_SETUP_SINGLE_ISSUER,IORING_SETUP_DEFER_TASKRUN", percore.SingleIssuer | percore.DeferTaskrun, false},
		{"lower case with spaces", " coop_taskrun , sqpoll ", percore.CoopTaskrun | percore.SQPoll, false},
		{"unknown", "single_issuer,fast", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := percore.ParseRingFlags(tt.in)
			if (err != nil) != tt.bad || got != tt.want {
				t.Fatalf("ParseRingFlags(%q) = %v, %v; want %v (error %v)", tt.in, got, err, tt.want, tt.bad)
			}
		})
	}
}

func TestParseBackend(t *testing.T) {
	for in, want := range map[string]percore.Backend{"": percore.Auto, "auto": percore.Auto, "uring": percore.IOURing, "io_uring": percore.IOURing, "epoll": percore.Epoll} {
		if got, err := percore.ParseBackend(in); err != nil || got != want {
			t.Errorf("ParseBackend(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := percore.ParseBackend("kqueue"); err == nil {
		t.Error("ParseBackend(kqueue): no error")
	}
}
