package runtime_test

import (
	"fmt"
	"testing"

	"github.com/percore/percore/cpu"
	"github.com/percore/percore/internal/pctest"
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

// TestCoresTwiceIsAnError: Config.Cores{0, 0} used to start two loops both
// logged cpus=0, while cpu.ParseList("0,0") dropped the second: both now
// refuse a CPU listed twice (decision 0030), New before any loop starts.
func TestCoresTwiceIsAnError(t *testing.T) {
	cores := allCores(t)
	for _, tt := range []struct {
		name  string
		cores []int
		want  string
	}{
		{"same cpu twice", []int{cores[0], cores[0]}, fmt.Sprintf("config: Cores lists cpu %d twice (entries 0 and 1): one loop per CPU", cores[0])},
		{"twice after another", []int{cores[0], cores[len(cores)-1], cores[0]}, fmt.Sprintf("config: Cores lists cpu %d twice (entries 0 and 2): one loop per CPU", cores[0])},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if len(cores) < 2 && len(tt.cores) > 2 {
				t.Skip("needs two CPUs in the affinity mask")
			}
			rt, err := percore.New(percore.Config{Cores: tt.cores, Logger: pctest.QuietLogger(t)}, nil)
			if err == nil {
				rt.Close()
				t.Fatalf("New with Cores %v started %d loops, want an error", tt.cores, len(rt.Loops()))
			}
			if err.Error() != tt.want {
				t.Fatalf("New with Cores %v: %q, want %q", tt.cores, err, tt.want)
			}
			if _, err := cpu.ParseList(cpu.FormatList(tt.cores[:1]) + "," + cpu.FormatList(tt.cores[:1])); err == nil {
				t.Fatalf("cpu.ParseList took cpu %d twice: the two rules differ", tt.cores[0])
			}
		})
	}
}
