package metrics_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/metrics"
)

func TestServer(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := start(t, b)
		s, err := metrics.Listen("127.0.0.1:0", rt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		echoes(t, rt, 1, 64)
		base := "http://" + s.Addr().String()

		pctest.WaitFor(t, "the loops to publish the accept", func() bool { return rt.Stats().Accepts == 1 })
		body := get(t, base+"/metrics")
		if !regexp.MustCompile(`\npercore_accepts_total\{cpu="\d+",loop="\d+"\} 1\n`).MatchString(body) {
			t.Errorf("no loop's percore_accepts_total is 1 after one connection:\n%s", body)
		}
		for _, want := range []string{
			"# TYPE percore_accepts_total counter\n",
			"# TYPE percore_loop_lag_p99_seconds gauge\n",
			`percore_loop_info{backend="` + b.String() + `",cpu=`,
			"# TYPE go_goroutines gauge\n",
			"# TYPE process_cpu_seconds_total counter\n",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}

		if body := get(t, base+"/debug/pprof/"); !strings.Contains(body, "goroutine") {
			t.Errorf("/debug/pprof/ does not list the goroutine profile:\n%s", body)
		}
		// Each loop's goroutine carries pprof labels: profiles tell the
		// loops apart.
		goroutines := get(t, base+"/debug/pprof/goroutine?debug=1")
		for _, want := range []string{`"percore_loop":"0"`, `"percore_cpu":"`} {
			if !strings.Contains(goroutines, want) {
				t.Errorf("the goroutine profile has no label %s", want)
			}
		}

		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	})
}

func TestListenErrors(t *testing.T) {
	rt := start(t, percore.Epoll)
	if s, err := metrics.Listen("127.0.0.1:0", rt, metrics.New(rt)); err == nil {
		s.Close()
		t.Error("Listen with the runtime's collector twice: no error")
	}
	if s, err := metrics.Listen("127.0.0.1:-1", rt); err == nil {
		s.Close()
		t.Error("Listen on port -1: no error")
	}
}
