// Command stats generates percore's counters from their one definition
// (table.go): the Stats struct of package runtime with its index constants
// and merge, the State and Statistics of package runtime/pool likewise, and
// the Prometheus tables of package runtime/metrics. Each of those packages
// runs it from a go:generate line with its own -target; the output is
// committed, and TestGeneratedFilesAreCurrent fails when it is stale.
//
// Usage (from anywhere in the module):
//
//	go run ./internal/gen/stats -target runtime|pool|metrics
//	go run ./internal/gen/stats -target all
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	target := flag.String("target", "all", "the file to generate: runtime, pool, metrics or all")
	flag.Parse()
	if err := run(*target); err != nil {
		fmt.Fprintln(os.Stderr, "stats:", err)
		os.Exit(1)
	}
}

func run(target string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	targets := []string{target}
	if target == "all" {
		targets = Targets
	}
	for _, t := range targets {
		out, err := Generate(t)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(root, out.Path), out.Src, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// moduleRoot is the directory of the go.mod above the working directory
// (go generate runs in the package's directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
