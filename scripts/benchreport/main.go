// Command benchreport summarises the raw runs of scripts/bench.sh: it prints
// the side-by-side table on stdout and can write it as markdown and as the
// TSV that scripts/benchplot draws.
//
//	benchreport -in runs.jsonl -baseline netpoll [-md results.md] [-tsv summary.tsv] [-check]
//	            [-title T] [-command C] [-about A]
//
// With -check it exits 1 when any run had errors, mismatched replies, no
// completed request, or a server that did not exit cleanly, after printing
// the table and the list of failures.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/percore/percore/internal/benchstat"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("benchreport", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "raw runs, one JSON object per line (required)")
	base := fs.String("baseline", "netpoll", "server the ratios compare with")
	md := fs.String("md", "", "write the table as markdown to this file")
	tsv := fs.String("tsv", "", "write the chart's figures as TSV to this file")
	title := fs.String("title", "", "markdown title")
	command := fs.String("command", "", "the command that produced the runs, for the markdown")
	about := fs.String("about", "", "a paragraph about the machine, for the markdown")
	check := fs.Bool("check", false, "exit 1 when any run failed")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *in == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "benchreport: -in is required and no arguments are taken")
		return 2
	}
	runs, err := readFile(*in)
	if err != nil {
		fmt.Fprintf(stderr, "benchreport: %v\n", err)
		return 2
	}
	if err := report(runs, *base, *md, *tsv, *title, *command, *about, stdout); err != nil {
		fmt.Fprintf(stderr, "benchreport: %v\n", err)
		return 2
	}
	if !*check {
		return 0
	}
	problems := benchstat.Problems(runs)
	for _, p := range problems {
		fmt.Fprintf(stderr, "benchreport: FAILED %s\n", p)
	}
	if len(problems) > 0 {
		return 1
	}
	return 0
}

func readFile(path string) ([]benchstat.Run, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	runs, err := benchstat.ReadRuns(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return runs, nil
}

func report(runs []benchstat.Run, base, md, tsv, title, command, about string, stdout io.Writer) error {
	rows := benchstat.Summarize(runs, base)
	if err := benchstat.WriteText(stdout, rows, base); err != nil {
		return err
	}
	if md != "" {
		if err := writeFile(md, func(w io.Writer) error {
			return benchstat.WriteMarkdown(w, rows, base, title, command, about)
		}); err != nil {
			return err
		}
	}
	if tsv != "" {
		return writeFile(tsv, func(w io.Writer) error { return benchstat.WriteTSV(w, rows) })
	}
	return nil
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
