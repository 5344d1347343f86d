package metrics_test

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/percore/percore/cpu"
	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

// start starts an echo runtime of the backend on every CPU this test may
// use (at most GOMAXPROCS of them), listening on 127.0.0.1:0, and closes it
// at cleanup.
func start(t *testing.T, b percore.Backend) *percore.Runtime {
	t.Helper()
	if b == percore.IOURing {
		pctest.NeedURing(t)
	}
	cores, err := cpu.Cores()
	if err != nil {
		t.Fatal(err)
	}
	rt, err := percore.New(percore.Config{Backend: b, Addr: "127.0.0.1:0", Cores: cores,
		Logger: pctest.QuietLogger(t)}, percore.HandlerFunc(func(c *percore.Conn, data []byte) { c.Write(data) }))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// echoes sends n payloads of size bytes over one connection to rt and reads
// each back, then closes the connection.
func echoes(t *testing.T, rt *percore.Runtime, n, size int) {
	t.Helper()
	c := pctest.Dial(t, rt.Addr().String())
	p := make([]byte, size)
	got := make([]byte, size)
	for range n {
		if _, err := c.Write(p); err != nil {
			t.Fatalf("write: %v", err)
		}
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatalf("read: %v", err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// gather collects c once and returns its families by name.
func gather(t *testing.T, c prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatalf("register: %v", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// sum adds up the values of every series of the family name whose labels
// include want (nil: all of them).
func sum(mfs map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var total float64
	for _, m := range mfs[name].GetMetric() {
		if !hasLabels(m, want) {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		}
	}
	return total
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == k && l.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// get fetches url and returns the body, failing the test on any error or a
// status other than 200.
func get(t *testing.T, url string) string {
	t.Helper()
	tr := &http.Transport{DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, resp.Status, body)
	}
	return string(body)
}
