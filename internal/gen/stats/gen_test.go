package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedFilesAreCurrent re-runs the generator and compares its
// output with the committed files: a table changed without go generate, or
// a generated file edited by hand, fails here.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range Targets {
		out, err := Generate(target)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		got, err := os.ReadFile(filepath.Join(root, out.Path))
		if err != nil {
			t.Fatalf("%s: %v (run go generate ./...)", target, err)
		}
		if !bytes.Equal(got, out.Src) {
			t.Errorf("%s is not what internal/gen/stats/table.go makes: run go generate ./... (first difference at line %d)",
				out.Path, firstDiffLine(got, out.Src))
		}
	}
}

func firstDiffLine(a, b []byte) int {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return i + 1
		}
	}
	return min(len(al), len(bl)) + 1
}

// TestGoGenerateLines: each package whose file the generator writes runs it
// with its own target.
func TestGoGenerateLines(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"runtime/stats.go":             "runtime",
		"runtime/pool/stats.go":        "pool",
		"runtime/metrics/collector.go": "metrics",
	}
	for file, target := range want {
		src, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		line := "//go:generate go run github.com/percore/percore/internal/gen/stats -target " + target + "\n"
		if !strings.Contains(string(src), line) {
			t.Errorf("%s has no line %q", file, strings.TrimSpace(line))
		}
	}
}

// TestGenerateRewritesAStaleFile runs the command as go generate would, in
// a copy of the module's generated files, and checks that it puts back a
// file that was edited.
func TestGenerateRewritesAStaleFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the generator")
	}
	dir := t.TempDir()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"go.mod", "runtime/stats_gen.go", "runtime/pool/stats_gen.go", "runtime/metrics/stats_gen.go"} {
		src, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		if p == "runtime/pool/stats_gen.go" {
			src = append([]byte("// edited by hand\n"), src...)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(t.TempDir(), "stats")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-target", "pool")
	cmd.Dir = filepath.Join(dir, "runtime/pool") // where go generate runs it
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("stats -target pool: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(dir, "runtime/pool/stats_gen.go"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := Generate("pool")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Src) {
		t.Fatal("the command did not rewrite the edited file")
	}
	if out, err := exec.Command(bin, "-target", "nonsense").CombinedOutput(); err == nil || !strings.Contains(string(out), `unknown target "nonsense"`) {
		t.Fatalf("an unknown target: %v, %s", err, out)
	}
}

// TestValidate: a table with a fault is refused with a message that names
// the field and the fault, and the real tables pass.
func TestValidate(t *testing.T) {
	for _, tb := range []*Table{&loopTable, &poolTable} {
		if err := tb.validate(); err != nil {
			t.Fatalf("%s: %v", tb.Target, err)
		}
	}
	good := func() Field {
		return Field{Name: "Things", Kind: Counter, Metric: "things_total", Doc: "Things counts things.", Help: "Things."}
	}
	tests := []struct {
		name   string
		edit   func(t *Table)
		errHas string
	}{
		{"no kind", func(t *Table) { t.Fields[0].Kind = 0 }, "no Kind"},
		{"doc not starting with the name", func(t *Table) { t.Fields[0].Doc = "Counts things." }, `start with "Things "`},
		{"duplicate field", func(t *Table) { t.Fields = append(t.Fields, t.Fields[0]) }, "defined twice"},
		{"unexported name", func(t *Table) { t.Fields[0].Name = "things"; t.Fields[0].Doc = "things counts." }, "not an exported Go identifier"},
		{"counter without _total", func(t *Table) { t.Fields[0].Metric = "things" }, "a counter's metric ends in _total"},
		{"gauge with _total", func(t *Table) { t.Fields[0].Kind = Gauge }, "only a counter's metric ends in _total"},
		{"bytes not in the name", func(t *Table) { t.Fields[0].Unit = Bytes }, "a metric of bytes says _bytes"},
		{"seconds not in the name", func(t *Table) { t.Fields[0].Unit = Seconds }, "ends in _seconds"},
		{"name says bytes, unit does not", func(t *Table) { t.Fields[0].Metric = "thing_bytes_total" }, "Unit is not Bytes"},
		{"no help", func(t *Table) { t.Fields[0].Help = "" }, "no Help"},
		{"no metric and no reason", func(t *Table) { t.Fields[0].Metric, t.Fields[0].Help = "", "" }, "no NoMetric"},
		{"metric and a reason", func(t *Table) { t.Fields[0].NoMetric = "why not" }, "both a Metric and a NoMetric"},
		{"bad metric name", func(t *Table) { t.Fields[0].Metric = "Things_total" }, "not lower_snake_case"},
		{"two fields, one series", func(t *Table) {
			f := good()
			f.Name, f.Doc = "Others", "Others counts others."
			t.Fields = append(t.Fields, f)
		}, "series things_total is exported by Things too"},
		{"a label outside a family", func(t *Table) { t.Fields[0].Label = "x" }, "not a family"},
		{"a family member without a label", func(t *Table) {
			t.Families = map[string]Family{"things_total": {Label: "kind", Help: "Things, by kind."}}
			t.Fields[0].Help = ""
		}, "give the field a Label"},
		{"a family without fields", func(t *Table) {
			t.Families = map[string]Family{"nothing_total": {Label: "kind", Help: "Nothing."}}
		}, "family nothing_total has no field"},
		{"unknown struct", func(t *Table) { t.Fields[0].Struct = "Other" }, `no struct "Other"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tb := &Table{Target: "test", Structs: []Struct{{Name: "S", Var: "s", GoType: "uint64"}}, Fields: []Field{good()}}
			tc.edit(tb)
			err := tb.validate()
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("error %q does not say %q", err, tc.errHas)
			}
		})
	}
}

// TestComment wraps doc text for the generated comments.
func TestComment(t *testing.T) {
	var b bytes.Buffer
	comment(&b, "\t", strings.Repeat("word ", 30)+"end.\n\nSecond paragraph.")
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if !strings.HasPrefix(line, "\t//") {
			t.Fatalf("line %q is not a comment", line)
		}
		if w := len(line) + 3; w > 80 { // a tab is four columns
			t.Fatalf("line %q is %d columns", line, w)
		}
	}
	if !strings.Contains(b.String(), "end.\n\t//\n\t// Second paragraph.\n") {
		t.Fatalf("paragraphs not kept:\n%s", b.String())
	}
}
