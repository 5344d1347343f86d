package cpu

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func allowed(t *testing.T) []int {
	t.Helper()
	cores, err := Cores()
	if err != nil {
		t.Fatalf("Cores: %v", err)
	}
	if len(cores) == 0 {
		t.Fatal("Cores returned an empty set")
	}
	return cores
}

func TestCoresUnderTaskset(t *testing.T) {
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		t.Skip("taskset (util-linux) is not installed")
	}
	cores := allowed(t)
	last := cores[len(cores)-1]
	tests := []struct {
		name string
		list string
		want []int
	}{
		{"cpu 0", "0", []int{0}},
		{"last allowed cpu", fmt.Sprint(last), []int{last}},
		{"whole allowed set", FormatList(cores), cores},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range tt.want {
				if !slices.Contains(cores, c) {
					t.Skipf("cpu %d is not in this process's allowed set %s", c, FormatList(cores))
				}
			}
			cmd := exec.Command(taskset, "-c", tt.list, os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), envPrintCores+"=1")
			out, err := cmd.Output()
			if err != nil {
				var stderr []byte
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = ee.Stderr
				}
				t.Fatalf("taskset -c %s %s: %v: %s", tt.list, os.Args[0], err, stderr)
			}
			got, err := ParseList(string(out))
			if err != nil {
				t.Fatalf("child printed %q: %v", out, err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Cores() under taskset -c %s = %v, want %v", tt.list, got, tt.want)
			}
		})
	}
}

// onFreshGoroutine runs f on a new goroutine and waits for it to exit. A
// thread f pinned dies with that goroutine, so it never runs other code.
func onFreshGoroutine(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

func TestPinThreadAffinity(t *testing.T) {
	cores := allowed(t)
	for _, c := range cores {
		t.Run(fmt.Sprintf("cpu %d", c), func(t *testing.T) {
			var errs []error
			onFreshGoroutine(func() {
				if err := Pin(c); err != nil {
					errs = append(errs, fmt.Errorf("Pin(%d): %w", c, err))
					return
				}
				var set unix.CPUSet
				if err := unix.SchedGetaffinity(0, &set); err != nil {
					errs = append(errs, fmt.Errorf("sched_getaffinity: %w", err))
				} else if set.Count() != 1 || !set.IsSet(c) {
					errs = append(errs, fmt.Errorf("sched_getaffinity after Pin(%d): %d cpus, cpu %d set: %v", c, set.Count(), c, set.IsSet(c)))
				}
				if got, err := Thread(); err != nil || !slices.Equal(got, []int{c}) {
					errs = append(errs, fmt.Errorf("Thread() after Pin(%d) = %v, %v; want [%d]", c, got, err, c))
				}
				if err := Pin(c); err != nil {
					errs = append(errs, fmt.Errorf("second Pin(%d) on the same thread: %w", c, err))
				}
				if other := otherThan(cores, c); other >= 0 {
					if err := Pin(other); !errors.Is(err, ErrNotAllowed) {
						errs = append(errs, fmt.Errorf("Pin(%d) on a thread pinned to %d = %v, want ErrNotAllowed", other, c, err))
					}
				}
				// Return while locked: the runtime terminates the thread.
			})
			for _, err := range errs {
				t.Error(err)
			}
			if got := allowed(t); !slices.Equal(got, cores) {
				t.Errorf("Cores() on an unlocked goroutine after the pinned one exited = %v, want %v", got, cores)
			}
		})
	}
}

func otherThan(cores []int, c int) int {
	for _, o := range cores {
		if o != c {
			return o
		}
	}
	return -1
}

func TestPinNotAllowed(t *testing.T) {
	cores := allowed(t)
	tests := []struct {
		name string
		cpu  int
	}{
		{"just above the allowed set", cores[len(cores)-1] + 1},
		{"above CPU_SETSIZE", 4096},
		{"above MaxCPU", MaxCPU + 1},
		{"negative", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			var after []int
			onFreshGoroutine(func() {
				runtime.LockOSThread() // read back the same thread Pin ran on
				err = Pin(tt.cpu)
				after, _ = Thread()
			})
			if !errors.Is(err, ErrNotAllowed) {
				t.Fatalf("Pin(%d) = %v, want an error wrapping ErrNotAllowed", tt.cpu, err)
			}
			var nae *NotAllowedError
			if !errors.As(err, &nae) || nae.CPU != tt.cpu || !slices.Equal(nae.Allowed, cores) {
				t.Errorf("Pin(%d) error = %#v, want *NotAllowedError{CPU: %d, Allowed: %v}", tt.cpu, err, tt.cpu, cores)
			}
			want := fmt.Sprintf("cpu: cpu %d is not in the allowed set %s", tt.cpu, FormatList(cores))
			if err.Error() != want {
				t.Errorf("Pin(%d) error text = %q, want %q", tt.cpu, err, want)
			}
			if !slices.Equal(after, cores) {
				t.Errorf("thread affinity after a failed Pin = %v, want it unchanged %v", after, cores)
			}
		})
	}
}

func TestNotAllowedErrorText(t *testing.T) {
	err := error(&NotAllowedError{CPU: 5, Allowed: []int{0, 1}})
	if got, want := err.Error(), "cpu: cpu 5 is not in the allowed set 0-1"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, ErrNotAllowed) {
		t.Error("errors.Is(err, ErrNotAllowed) = false")
	}
}

func TestReadAffinity(t *testing.T) {
	tests := []struct {
		name    string
		results []error // what each call of get returns, in order
		set     int     // the cpu get sets when it succeeds
		want    []int
		wantErr error
	}{
		{name: "fits CPU_SETSIZE", results: []error{nil}, set: 3, want: []int{3}},
		{name: "kernel mask wider than CPU_SETSIZE", results: []error{unix.EINVAL, nil}, set: 2000, want: []int{2000}},
		{name: "permission denied", results: []error{unix.EPERM}, wantErr: unix.EPERM},
		{name: "invalid at every size", results: []error{unix.EINVAL, unix.EINVAL}, wantErr: unix.EINVAL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			got, err := readAffinity(func(s unix.CPUSetDynamic) error {
				if calls >= len(tt.results) {
					t.Fatalf("get called %d times, want %d", calls+1, len(tt.results))
				}
				res := tt.results[calls]
				calls++
				if res == nil {
					s.Set(tt.set)
				}
				return res
			})
			if tt.wantErr != nil {
				var se *os.SyscallError
				if !errors.As(err, &se) || se.Syscall != "sched_getaffinity" || !errors.Is(err, tt.wantErr) {
					t.Fatalf("readAffinity error = %v, want an *os.SyscallError for sched_getaffinity wrapping %v", err, tt.wantErr)
				}
				if !strings.HasPrefix(err.Error(), "cpu: read affinity: ") {
					t.Errorf("error text %q lacks the context prefix", err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("readAffinity = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}
