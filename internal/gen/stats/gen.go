package main

import (
	"errors"
	"fmt"
	"go/format"
	"regexp"
	"slices"
	"strings"
)

// Kind says how a value behaves over time and how the values of several
// loops combine.
type Kind int

const (
	// Counter only grows; loops add up; a Prometheus counter.
	Counter Kind = iota + 1
	// Gauge is a level now; loops add up; a Prometheus gauge.
	Gauge
	// Max is a signal over a window; loops combine by the maximum; a
	// Prometheus gauge that must not be summed.
	Max
)

func (k Kind) String() string {
	switch k {
	case Counter:
		return "counter"
	case Gauge:
		return "gauge"
	case Max:
		return "max"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Unit is what a value counts.
type Unit int

const (
	// Count is the zero Unit: things (connections, calls, turns).
	Count Unit = iota
	// Bytes: the metric's name says _bytes.
	Bytes
	// Seconds: the Go field is a time.Duration, the metric says _seconds
	// and exports seconds.
	Seconds
)

// Field is one value: a Go field, its index in the published values, and
// its metric.
type Field struct {
	// Struct names the struct the field is in, for a table of several;
	// empty means the table's only struct.
	Struct string
	// Name is the Go field's name, and (after the table's prefix) its
	// index constant's.
	Name string
	Kind Kind
	Unit Unit
	// GoType overrides the struct's type of a field (a Duration for
	// Seconds whatever it says).
	GoType string
	// Doc is the Go doc of the field: full sentences, starting with Name.
	Doc string
	// Metric is the metric's name without the namespace; empty when the
	// field is not exported (NoMetric then says why).
	Metric string
	// Label is the value of the family's variable label (Table.Families)
	// when several fields share one metric.
	Label string
	// Help is the Prometheus help of a metric of its own (a labelled
	// family's is in Table.Families).
	Help     string
	NoMetric string
	// Unpublished fields have no index: the reader fills them in.
	Unpublished bool
}

// Struct is a generated struct.
type Struct struct {
	Name   string
	Var    string // the receiver and parameter name in generated code
	GoType string // the fields' type unless they say otherwise
	Doc    string
}

// Family is a metric that several fields share, one series each, told
// apart by one variable label.
type Family struct {
	Label string
	Help  string
}

// Table is one package's counters.
type Table struct {
	Target     string // the -target that generates its package's file
	Package    string
	ImportPath string
	Linux      bool // the package is Linux-only (a build constraint)
	Structs    []Struct
	Fields     []Field
	Families   map[string]Family

	Index    string // the index type's name
	IndexDoc string

	// The Prometheus table's names in package metrics.
	MetricVar, MetricType, NotExportedVar, LabelsVar string
}

// namespace is the prefix of every metric (package metrics adds it).
const namespace = "percore"

var (
	goIdent    = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	metricName = regexp.MustCompile(`^[a-z][a-z0-9_]*[a-z0-9]$`)
	labelValue = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
)

// validate reports every fault of t, joined, or nil.
func (t *Table) validate() error {
	var errs []error
	bad := func(f *Field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s.%s: %s", t.Target, f.Struct, f.Name, fmt.Sprintf(format, args...)))
	}
	if len(t.Structs) == 0 {
		return fmt.Errorf("%s: no struct", t.Target)
	}
	structs := map[string]bool{}
	for _, s := range t.Structs {
		structs[s.Name] = true
	}
	names := map[string]bool{}
	series := map[string]string{}
	kindOf := map[string]Kind{}
	for i := range t.Fields {
		f := &t.Fields[i]
		if f.Struct == "" && len(t.Structs) == 1 {
			f.Struct = t.Structs[0].Name
		}
		switch {
		case !structs[f.Struct]:
			bad(f, "no struct %q in the table", f.Struct)
		case !goIdent.MatchString(f.Name):
			bad(f, "not an exported Go identifier")
		case names[f.Name]:
			bad(f, "defined twice (index constants are named for fields, across structs)")
		}
		names[f.Name] = true
		if f.Kind < Counter || f.Kind > Max {
			bad(f, "no Kind (Counter, Gauge or Max)")
		}
		if !strings.HasPrefix(f.Doc, f.Name+" ") || !strings.HasSuffix(f.Doc, ".") {
			bad(f, "Doc must be sentences that start with %q and end with a period: %q", f.Name+" ", f.Doc)
		}
		if f.Unit == Seconds && f.GoType != "" && f.GoType != "time.Duration" {
			bad(f, "Seconds are a time.Duration, not %s", f.GoType)
		}
		if f.Metric == "" {
			if f.NoMetric == "" {
				bad(f, "no Metric, and no NoMetric to say why")
			}
			if f.Help != "" || f.Label != "" {
				bad(f, "Help or Label without a Metric")
			}
			continue
		}
		if f.NoMetric != "" {
			bad(f, "both a Metric and a NoMetric reason")
		}
		if !metricName.MatchString(f.Metric) || strings.Contains(f.Metric, "__") {
			bad(f, "metric name %q is not lower_snake_case", f.Metric)
		}
		if k, ok := kindOf[f.Metric]; ok && k != f.Kind {
			bad(f, "metric %s is a %v for another field", f.Metric, k)
		}
		kindOf[f.Metric] = f.Kind
		total := strings.HasSuffix(f.Metric, "_total")
		switch {
		case f.Kind == Counter && !total:
			bad(f, "a counter's metric ends in _total: %s", f.Metric)
		case f.Kind != Counter && total:
			bad(f, "only a counter's metric ends in _total: %s is a %v", f.Metric, f.Kind)
		}
		base := strings.TrimSuffix(f.Metric, "_total")
		switch unit := f.Unit; {
		case unit == Bytes && !strings.Contains(base, "_bytes"):
			bad(f, "a metric of bytes says _bytes: %s", f.Metric)
		case unit == Seconds && !strings.HasSuffix(base, "_seconds"):
			bad(f, "a metric of seconds ends in _seconds (or _seconds_total): %s", f.Metric)
		case unit != Bytes && strings.Contains(base, "_bytes"):
			bad(f, "%s says _bytes, but the field's Unit is not Bytes", f.Metric)
		case unit != Seconds && strings.Contains(base, "_seconds"):
			bad(f, "%s says _seconds, but the field's Unit is not Seconds", f.Metric)
		}
		fam, labelled := t.Families[f.Metric]
		id := f.Metric
		switch {
		case labelled && f.Label == "":
			bad(f, "metric %s is a family labelled by %s: give the field a Label", f.Metric, fam.Label)
		case labelled && !labelValue.MatchString(f.Label):
			bad(f, "label value %q is not lower_snake_case", f.Label)
		case labelled && f.Help != "":
			bad(f, "the help of family %s is the family's (Table.Families), not the field's", f.Metric)
		case labelled:
			id += "{" + fam.Label + "=" + f.Label + "}"
		case f.Label != "":
			bad(f, "Label %q, but %s is not a family in Table.Families", f.Label, f.Metric)
		case f.Help == "" || !strings.HasSuffix(f.Help, "."):
			bad(f, "no Help, or one that does not end with a period: %q", f.Help)
		}
		if other, dup := series[id]; dup {
			bad(f, "series %s is exported by %s too", id, other)
		}
		series[id] = f.Name
	}
	for name, fam := range t.Families {
		if kindOf[name] == 0 {
			errs = append(errs, fmt.Errorf("%s: family %s has no field", t.Target, name))
		}
		if !labelValue.MatchString(fam.Label) || fam.Help == "" {
			errs = append(errs, fmt.Errorf("%s: family %s needs a lower_snake_case Label and a Help", t.Target, name))
		}
	}
	return errors.Join(errs...)
}

// goType is f's Go type.
func (t *Table) goType(f *Field) string {
	switch {
	case f.Unit == Seconds:
		return "time.Duration"
	case f.GoType != "":
		return f.GoType
	}
	for _, s := range t.Structs {
		if s.Name == f.Struct {
			return s.GoType
		}
	}
	return ""
}

func (t *Table) structVar(name string) string {
	for _, s := range t.Structs {
		if s.Name == name {
			return s.Var
		}
	}
	return ""
}

// published are the fields that have an index, in order.
func (t *Table) published() []*Field {
	var fs []*Field
	for i := range t.Fields {
		if !t.Fields[i].Unpublished {
			fs = append(fs, &t.Fields[i])
		}
	}
	return fs
}

func (t *Table) usesTime() bool {
	return slices.ContainsFunc(t.Fields, func(f Field) bool { return f.Unit == Seconds })
}

// seriesName is the Prometheus series of f, for the Go doc.
func (t *Table) seriesName(f *Field) string {
	if fam, ok := t.Families[f.Metric]; ok {
		return fmt.Sprintf("%s_%s{%s=%q}", namespace, f.Metric, fam.Label, f.Label)
	}
	return namespace + "_" + f.Metric
}

// Output is one generated file.
type Output struct {
	Path string // from the module's root
	Src  []byte
}

// Generate makes the file of target ("runtime", "pool" or "metrics"),
// gofmt'ed, or says what is wrong with the tables.
func Generate(target string) (Output, error) {
	tables := []*Table{&loopTable, &poolTable}
	for _, t := range tables {
		if err := t.validate(); err != nil {
			return Output{}, err
		}
	}
	var out Output
	switch target {
	case "runtime":
		out = Output{"runtime/stats_gen.go", loopTable.typesFile()}
	case "pool":
		out = Output{"runtime/pool/stats_gen.go", poolTable.typesFile()}
	case "metrics":
		out = Output{"runtime/metrics/stats_gen.go", metricsFile(tables...)}
	default:
		return Output{}, fmt.Errorf("unknown target %q (runtime, pool or metrics)", target)
	}
	src, err := format.Source(out.Src)
	if err != nil {
		return Output{}, fmt.Errorf("%s: the generated code does not parse: %w", out.Path, err)
	}
	out.Src = src
	return out, nil
}

// Targets are the targets, one per generated file.
var Targets = []string{"runtime", "pool", "metrics"}
