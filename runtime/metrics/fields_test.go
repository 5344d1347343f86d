package metrics

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/pool"
)

// setOne sets field i of the struct v points to to a small non-zero value
// (one nanosecond for a time.Duration), whatever its integer kind.
func setOne(t *testing.T, v reflect.Value, i int) {
	t.Helper()
	f := v.Field(i)
	switch f.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		f.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		f.SetUint(1)
	case reflect.Float32, reflect.Float64:
		f.SetFloat(1)
	default:
		t.Fatalf("%s.%s is a %s: teach this test and the collector how to export it",
			v.Type().Name(), v.Type().Field(i).Name, f.Type())
	}
}

// TestEveryStatsField fails when a field of runtime.Stats has no metric:
// for each field, a Stats with only that field set must move exactly the
// metric that statMetrics says exports it. A new field goes into
// statMetrics, or into statsNotExported with the reason.
func TestEveryStatsField(t *testing.T) {
	typ := reflect.TypeFor[runtime.Stats]()
	fields := map[string]bool{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() {
			continue
		}
		fields[f.Name] = true
		_, excluded := statsNotExported[f.Name]
		var s runtime.Stats
		setOne(t, reflect.ValueOf(&s).Elem(), i)
		var moved []string
		for _, m := range statMetrics {
			if m.value(&s) != 0 {
				moved = append(moved, m.field)
			}
		}
		switch {
		case excluded && len(moved) > 0:
			t.Errorf("Stats.%s is in statsNotExported, but metrics of %v read it", f.Name, moved)
		case excluded:
		case len(moved) == 0:
			t.Errorf("Stats.%s has no metric: add it to statMetrics (collector.go) or to statsNotExported with the reason", f.Name)
		case len(moved) > 1 || moved[0] != f.Name:
			t.Errorf("setting Stats.%s moved the metrics of %v, want only that of %s", f.Name, moved, f.Name)
		}
	}
	names := map[string]bool{}
	for _, m := range statMetrics {
		if !fields[m.field] {
			t.Errorf("statMetrics names Stats.%s, which does not exist", m.field)
		}
		if names[m.name] {
			t.Errorf("two metrics are named %s", m.name)
		}
		names[m.name] = true
	}
	for f := range statsNotExported {
		if !fields[f] {
			t.Errorf("statsNotExported names Stats.%s, which does not exist", f)
		}
	}
}

// TestEveryPoolField is TestEveryStatsField for pool.Statistics and
// pool.State.
func TestEveryPoolField(t *testing.T) {
	fields := map[string]bool{}
	for _, typ := range []reflect.Type{reflect.TypeFor[pool.Statistics](), reflect.TypeFor[pool.State]()} {
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() {
				continue
			}
			key := typ.Name() + "." + f.Name
			fields[key] = true
			_, excluded := poolNotExported[key]
			var s pool.Statistics
			var st pool.State
			if typ == reflect.TypeFor[pool.State]() {
				setOne(t, reflect.ValueOf(&st).Elem(), i)
			} else {
				setOne(t, reflect.ValueOf(&s).Elem(), i)
			}
			var moved []string
			for _, m := range poolMetrics {
				if m.value(&st, &s) != 0 {
					moved = append(moved, m.field)
				}
			}
			switch {
			case excluded && len(moved) > 0:
				t.Errorf("%s is in poolNotExported, but metrics of %v read it", key, moved)
			case excluded:
			case len(moved) == 0:
				t.Errorf("%s has no metric: add it to poolMetrics (pool.go) or to poolNotExported with the reason", key)
			case len(moved) > 1 || moved[0] != key:
				t.Errorf("setting %s moved the metrics of %v, want only that of %s", key, moved, key)
			}
		}
	}
	seen := map[string]bool{}
	for _, m := range poolMetrics {
		if !fields[m.field] {
			t.Errorf("poolMetrics names %s, which does not exist", m.field)
		}
		id := m.name + "{" + m.label + "}"
		if seen[id] {
			t.Errorf("two pool series are %s", id)
		}
		seen[id] = true
		if _, labelled := poolLabelNames[m.name]; labelled != (m.label != "") {
			t.Errorf("%s: label value %q, but poolLabelNames says labelled=%v", m.field, m.label, labelled)
		}
	}
	for f := range poolNotExported {
		if !fields[f] {
			t.Errorf("poolNotExported names %s, which does not exist", f)
		}
	}
}

// TestLagInSeconds checks the unit conversion of the lag gauges.
func TestLagInSeconds(t *testing.T) {
	s := runtime.Stats{LagP50: 250 * time.Microsecond, LagP99: 3 * time.Millisecond, LagMax: time.Second}
	want := map[string]float64{"LagP50": 250e-6, "LagP99": 3e-3, "LagMax": 1}
	for _, m := range statMetrics {
		if w, ok := want[m.field]; ok {
			if got := m.value(&s); got != w {
				t.Errorf("%s = %v, want %v", m.name, got, w)
			}
		}
	}
}

// TestDocumentedMetricsExist: every metric the Grafana dashboard
// (docs/grafana-percore.json) queries, and every one the table of
// docs/operations.md describes, is one this package exports, so that a
// rename in the counters' table cannot leave a panel or a runbook line
// behind.
func TestDocumentedMetricsExist(t *testing.T) {
	exported := map[string]bool{namespace + "_loop_info": true, namespace + "_heap_returns_total": true,
		namespace + "_heap_returned_bytes_total": true, namespace + "_heap_return_seconds_total": true}
	for _, m := range statMetrics {
		exported[namespace+"_"+m.name] = true
	}
	for _, m := range poolMetrics {
		exported[namespace+"_"+m.name] = true
	}
	name := regexp.MustCompile(`percore_[a-z0-9_]*[a-z0-9]`)
	dash, err := os.ReadFile("../../docs/grafana-percore.json")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, n := range name.FindAllString(string(dash), -1) {
		found++
		if !exported[n] {
			t.Errorf("docs/grafana-percore.json queries %s, which no collector exports", n)
		}
	}
	ops, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(ops), "\n") {
		if !strings.HasPrefix(line, "| `"+namespace+"_") {
			continue
		}
		first := strings.SplitN(line, "|", 3)[1]
		for _, n := range name.FindAllString(first, -1) {
			found++
			if !exported[n] {
				t.Errorf("docs/operations.md describes %s, which no collector exports", n)
			}
		}
	}
	if found < 40 {
		t.Fatalf("found only %d metric names in the docs: the test reads the wrong files", found)
	}
}

// TestHeapReturnMetrics: the process's returns after storms are exported
// as they are counted, in bytes and seconds.
func TestHeapReturnMetrics(t *testing.T) {
	defer func(f func() runtime.HeapReturnStats) { heapReturns = f }(heapReturns)
	heapReturns = func() runtime.HeapReturnStats {
		return runtime.HeapReturnStats{Returns: 3, Bytes: 5 << 20, Took: 1500 * time.Millisecond}
	}
	want := `
# HELP percore_heap_return_seconds_total The time the process's returns after storms took (the collection and the scavenge), summed.
# TYPE percore_heap_return_seconds_total counter
percore_heap_return_seconds_total 1.5
# HELP percore_heap_returned_bytes_total The bytes the process's returns after storms gave back to the kernel.
# TYPE percore_heap_returned_bytes_total counter
percore_heap_returned_bytes_total 5.24288e+06
# HELP percore_heap_returns_total The process's returns after storms (Config.ReturnAfterStorm): a collection and the heap's free pages given back, once a storm of new connections settled.
# TYPE percore_heap_returns_total counter
percore_heap_returns_total 3
`
	err := testutil.CollectAndCompare(newCollector(nil), strings.NewReader(want),
		"percore_heap_returns_total", "percore_heap_returned_bytes_total", "percore_heap_return_seconds_total")
	if err != nil {
		t.Error(err)
	}
}
