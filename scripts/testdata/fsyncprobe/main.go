//go:build linux

// Command fsyncprobe measures what one fdatasync costs on a directory's
// file system: it appends 100 bytes to a file and fdatasyncs it, -n times,
// and prints the percentiles (scripts/bench-wal.sh: the physical floor of
// a durable acknowledgement).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	dir := flag.String("dir", os.TempDir(), "directory on the file system to probe")
	n := flag.Int("n", 2000, "fdatasyncs")
	flag.Parse()
	name := filepath.Join(*dir, "fsyncprobe.tmp")
	f, err := os.Create(name)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fsyncprobe:", err)
		os.Exit(1)
	}
	defer os.Remove(name)
	defer f.Close()
	buf := make([]byte, 100)
	ds := make([]time.Duration, 0, *n)
	for i := range *n {
		if _, err := f.WriteAt(buf, int64(i*len(buf))); err != nil {
			fmt.Fprintln(os.Stderr, "fsyncprobe:", err)
			os.Exit(1)
		}
		t := time.Now()
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			fmt.Fprintln(os.Stderr, "fsyncprobe:", err)
			os.Exit(1)
		}
		ds = append(ds, time.Since(t))
	}
	slices.Sort(ds)
	q := func(p float64) time.Duration { return ds[int(p*float64(len(ds)-1))].Round(time.Microsecond) }
	fmt.Printf("fdatasync of a 100-byte append on %s, %d times: min %v p50 %v p90 %v p99 %v max %v\n",
		*dir, len(ds), ds[0].Round(time.Microsecond), q(0.5), q(0.9), q(0.99), ds[len(ds)-1].Round(time.Microsecond))
}
