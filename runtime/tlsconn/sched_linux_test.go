//go:build linux

package tlsconn_test

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/percore/percore/cpu"
	"github.com/percore/percore/runtime/tlsconn"
)

// threadState is what the kernel says of one thread: its policy, nice
// value and CPUs.
type threadState struct {
	policy uint32
	nice   int32
	cpus   string
}

func currentThread(t testing.TB) threadState {
	a, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		t.Error(err)
		return threadState{}
	}
	cpus, err := cpu.Thread()
	if err != nil {
		t.Error(err)
	}
	return threadState{a.Policy, a.Nice, cpu.FormatList(cpus)}
}

// TestPoolThreadSched: crypto/tls's callbacks (GetCertificate on the
// server, VerifyConnection on the client) run while the handshake
// computes, on its pool goroutine: there the thread has the pool's Sched
// and CPUs. Once the pool is closed no thread of the process is left
// with them (put back, or gone with its goroutine).
func TestPoolThreadSched(t *testing.T) {
	cores, err := cpu.Cores()
	if err != nil {
		t.Fatal(err)
	}
	before := processThreads(t)
	for _, tc := range []struct {
		name   string
		sched  tlsconn.Sched
		cpus   []int
		policy uint32
		nice   int32
	}{
		{"default is nice", tlsconn.SchedDefault, nil, unix.SCHED_NORMAL, 19},
		{"idle on one cpu", tlsconn.SchedIdle, cores[len(cores)-1:], unix.SCHED_IDLE, 0},
		{"nice", tlsconn.SchedNice, nil, unix.SCHED_NORMAL, 19},
		{"normal on one cpu", tlsconn.SchedNormal, cores[:1], unix.SCHED_NORMAL, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := tlsconn.NewPool(tlsconn.PoolConfig{Sched: tc.sched, CPUs: tc.cpus})
			var mu sync.Mutex
			var seen []threadState
			record := func() {
				st := currentThread(t)
				mu.Lock()
				seen = append(seen, st)
				mu.Unlock()
			}
			scfg := serverConfig(t).Clone()
			certs := scfg.Certificates
			scfg.Certificates = nil
			scfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				record()
				return &certs[0], nil
			}
			ccfg := clientConfig(t).Clone()
			ccfg.VerifyConnection = func(tls.ConnectionState) error { record(); return nil }
			srv, cli := handshakePair(t, pool, scfg, ccfg)
			srv.Close()
			cli.Close()
			pool.Close()
			wantCPUs := cpu.FormatList(cores)
			if tc.cpus != nil {
				wantCPUs = cpu.FormatList(tc.cpus)
			}
			if len(seen) != 2 {
				t.Fatalf("%d callbacks seen, want 2", len(seen))
			}
			for _, st := range seen {
				if st.policy != tc.policy || st.nice != tc.nice || st.cpus != wantCPUs {
					t.Errorf("computing thread %+v, want policy %d nice %d cpus %s", st, tc.policy, tc.nice, wantCPUs)
				}
			}
			waitFor(t, "every thread put back", func() bool { return processThreads(t) == before })
		})
	}
}

// processThreads summarises the scheduling of the process's threads as
// /proc shows it: the kinds of (policy, nice, CPUs) among them. The main
// thread is left out: a goroutine that exits locked to it does not end it
// (Go wedges it, and never runs anything on it again).
func processThreads(t testing.TB) string {
	tids, err := filepath.Glob("/proc/self/task/*")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, dir := range tids {
		if filepath.Base(dir) == strconv.Itoa(os.Getpid()) {
			continue
		}
		stat, err1 := os.ReadFile(dir + "/stat")
		status, err2 := os.ReadFile(dir + "/status")
		if err1 != nil || err2 != nil {
			continue // the thread ended
		}
		// The fields after the command's closing parenthesis: nice is
		// the 19th field of stat, policy the 41st.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
		cpus := ""
		for _, l := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(l, "Cpus_allowed_list:"); ok {
				cpus = strings.TrimSpace(v)
			}
		}
		kinds[fmt.Sprintf("policy %s nice %s cpus %s", f[41-3], f[19-3], cpus)] = true
	}
	var out []string
	for k := range kinds {
		out = append(out, k)
	}
	return strings.Join(slices.Sorted(slices.Values(out)), "; ")
}

// TestNotifyOnRestoredThread: a session's Notify (the loop's post, in a
// server) is called only once its pool goroutine's thread is back at its
// own scheduling: never at the pool's nice 19 or SCHED_IDLE, nor on its
// CPUs, where a wake-up of the loop would preempt it inside the post.
func TestNotifyOnRestoredThread(t *testing.T) {
	cores, err := cpu.Cores()
	if err != nil {
		t.Fatal(err)
	}
	for _, sched := range []tlsconn.Sched{tlsconn.SchedNice, tlsconn.SchedIdle} {
		t.Run(sched.String(), func(t *testing.T) {
			pool := newPool(t, tlsconn.PoolConfig{Sched: sched, CPUs: cores[len(cores)-1:]})
			if st := pool.Stats(); st.Sched != sched {
				t.Skipf("the pool's threads are not lowered here (Stats().Sched %v)", st.Sched)
			}
			var mu sync.Mutex
			var seen []threadState
			news := make(chan struct{}, 1)
			notify := func() {
				st := currentThread(t)
				mu.Lock()
				seen = append(seen, st)
				mu.Unlock()
				select {
				case news <- struct{}{}:
				default:
				}
			}
			for range 20 {
				srv, cli := handshakeWith(t, pool, serverConfig(t), clientConfig(t), notify, news)
				srv.Close()
				cli.Close()
			}
			mu.Lock()
			defer mu.Unlock()
			if len(seen) < 40 {
				t.Fatalf("%d Notify calls for 20 handshakes, want at least 2 each", len(seen))
			}
			want := threadState{unix.SCHED_NORMAL, 0, cpu.FormatList(cores)}
			for _, st := range seen {
				if st != want {
					t.Fatalf("Notify on a thread with %+v, want %+v", st, want)
				}
			}
		})
	}
}
