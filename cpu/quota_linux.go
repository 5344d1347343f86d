package cpu

import (
	"bytes"
	"os"
	"path"
	"strconv"
	"strings"
)

// Quota returns the CPU bandwidth limit set on the calling process's
// cgroups, in CPUs (quota over period: 3.5 for a cgroup v2 cpu.max of
// "350000 100000"), the lowest along the hierarchy from the process's own
// cgroup up to the root of its mount, so that a limit set on a parent (a
// systemd slice's CPUQuota=, a container runtime's parent cgroup) counts
// too. It reports false when no limit is set ("max" in cgroup v2, a quota
// of -1 in cgroup v1) or the files cannot be read. The cpu controller of
// cgroup v1 is used where it is mounted (a hybrid host), else cgroup v2.
//
// Unlike Go's own default GOMAXPROCS (which rounds a quota up, to at least
// 2, and reads only the process's own cgroup), Quota reports the limit
// as it is: a program that sizes its runnable threads by it (percore's TLS
// handshake pools) stays under the quota and is not throttled.
func Quota() (float64, bool) { return quota(os.ReadFile) }

// quota is Quota with the files read through read (the tests build a tree).
func quota(read func(string) ([]byte, error)) (float64, bool) {
	groups, err := read("/proc/self/cgroup")
	if err != nil {
		return 0, false
	}
	mounts, err := read("/proc/self/mountinfo")
	if err != nil {
		return 0, false
	}
	v1, v2, hasV1, hasV2 := "", "", false, false
	for line := range strings.Lines(string(groups)) {
		// hierarchy-ID:controllers:path
		f := strings.SplitN(strings.TrimRight(line, "\n"), ":", 3)
		if len(f) != 3 {
			continue
		}
		switch {
		case f[0] == "0" && f[1] == "":
			v2, hasV2 = f[2], true
		case hasController(f[1], "cpu"):
			v1, hasV1 = f[2], true
		}
	}
	if hasV1 {
		if dir, root, ok := cgroupDir(mounts, "cgroup", v1); ok {
			return lowest(read, dir, root, v1Limit)
		}
	}
	if hasV2 {
		if dir, root, ok := cgroupDir(mounts, "cgroup2", v2); ok {
			return lowest(read, dir, root, v2Limit)
		}
	}
	return 0, false
}

// hasController reports whether the comma-separated list names c.
func hasController(list, c string) bool {
	for _, x := range strings.Split(list, ",") {
		if x == c {
			return true
		}
	}
	return false
}

// cgroupDir finds the directory of the cgroup at path (as
// /proc/self/cgroup names it) under its mount of type fstype (for cgroup
// v1, the mount carrying the cpu controller), and the mount point, where
// the walk up the hierarchy stops. A mount of a subtree (its root field
// not "/", as a container without a cgroup namespace sees it) is entered
// at that subtree.
func cgroupDir(mountinfo []byte, fstype, cgpath string) (dir, mountPoint string, ok bool) {
	for line := range strings.Lines(string(mountinfo)) {
		// id parent major:minor root mount-point options [optional...] - fstype source super-options
		pre, post, found := strings.Cut(strings.TrimRight(line, "\n"), " - ")
		if !found {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 || g[0] != fstype {
			continue
		}
		if fstype == "cgroup" && !hasController(g[2], "cpu") {
			continue
		}
		root, mp := unescape(f[3]), unescape(f[4])
		rel := cgpath
		if root != "/" {
			r, cut := strings.CutPrefix(cgpath, root)
			if !cut || (r != "" && r[0] != '/') {
				continue // the process's cgroup is outside this mount
			}
			rel = r
		}
		return path.Join(mp, rel), mp, true
	}
	return "", "", false
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// lowest walks from dir up to stop (inclusive) and returns the lowest
// limit read there.
func lowest(read func(string) ([]byte, error), dir, stop string, limit func(read func(string) ([]byte, error), dir string) (float64, bool)) (float64, bool) {
	best, found := 0.0, false
	for {
		if q, ok := limit(read, dir); ok && (!found || q < best) {
			best, found = q, true
		}
		if dir == stop || dir == "/" || !strings.HasPrefix(dir, stop) {
			return best, found
		}
		dir = path.Dir(dir)
	}
}

// v2Limit reads a cgroup v2 cpu.max: "max PERIOD" or "QUOTA PERIOD".
func v2Limit(read func(string) ([]byte, error), dir string) (float64, bool) {
	b, err := read(path.Join(dir, "cpu.max"))
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 || f[0] == "max" {
		return 0, false
	}
	return ratio(f[0], f[1])
}

// v1Limit reads a cgroup v1 cpu.cfs_quota_us (-1: none) and
// cpu.cfs_period_us.
func v1Limit(read func(string) ([]byte, error), dir string) (float64, bool) {
	q, err := read(path.Join(dir, "cpu.cfs_quota_us"))
	if err != nil {
		return 0, false
	}
	p, err := read(path.Join(dir, "cpu.cfs_period_us"))
	if err != nil {
		return 0, false
	}
	return ratio(string(bytes.TrimSpace(q)), string(bytes.TrimSpace(p)))
}

// ratio parses quota and period (microseconds) and returns quota/period,
// false for a negative or unparsable quota or a zero period.
func ratio(quota, period string) (float64, bool) {
	q, err1 := strconv.ParseInt(quota, 10, 64)
	p, err2 := strconv.ParseInt(period, 10, 64)
	if err1 != nil || err2 != nil || q <= 0 || p <= 0 {
		return 0, false
	}
	return float64(q) / float64(p), true
}
