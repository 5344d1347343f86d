package cpu

import (
	"io/fs"
	"testing"
)

// files is a read function over a fixed set of files.
func files(m map[string]string) func(string) ([]byte, error) {
	return func(name string) ([]byte, error) {
		if s, ok := m[name]; ok {
			return []byte(s), nil
		}
		return nil, fs.ErrNotExist
	}
}

const (
	mountsV2 = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
	// A hybrid host (this project's VMs): cgroup v1 controllers, v2 unified without them.
	mountsHybrid = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n" +
		"32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n" +
		"34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n" +
		"41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
	// A container without a cgroup namespace: the mount is its own subtree.
	mountsSubtree = "40 30 0:29 /kubepods/pod1/c1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
)

func TestQuota(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  float64
		ok    bool
	}{
		{"v2 fractional", map[string]string{
			"/proc/self/cgroup": "0::/app.slice/x.service\n", "/proc/self/mountinfo": mountsV2,
			"/sys/fs/cgroup/app.slice/x.service/cpu.max": "350000 100000\n",
			"/sys/fs/cgroup/app.slice/cpu.max":           "max 100000\n",
		}, 3.5, true},
		{"v2 on a parent only (a slice's CPUQuota=)", map[string]string{
			"/proc/self/cgroup": "0::/app.slice/x.service\n", "/proc/self/mountinfo": mountsV2,
			"/sys/fs/cgroup/app.slice/x.service/cpu.max": "max 100000\n",
			"/sys/fs/cgroup/app.slice/cpu.max":           "150000 100000\n",
		}, 1.5, true},
		{"v2 the lowest of two", map[string]string{
			"/proc/self/cgroup": "0::/a/b\n", "/proc/self/mountinfo": mountsV2,
			"/sys/fs/cgroup/a/b/cpu.max": "400000 100000\n",
			"/sys/fs/cgroup/a/cpu.max":   "200000 100000\n",
		}, 2, true},
		{"v2 none", map[string]string{
			"/proc/self/cgroup": "0::/a\n", "/proc/self/mountinfo": mountsV2,
			"/sys/fs/cgroup/a/cpu.max": "max 100000\n",
		}, 0, false},
		{"v2 no cpu controller (no cpu.max)", map[string]string{
			"/proc/self/cgroup": "0::/a\n", "/proc/self/mountinfo": mountsV2,
		}, 0, false},
		{"v2 subtree mount", map[string]string{
			"/proc/self/cgroup": "0::/kubepods/pod1/c1\n", "/proc/self/mountinfo": mountsSubtree,
			"/sys/fs/cgroup/cpu.max": "50000 100000\n",
		}, 0.5, true},
		{"v1 on a hybrid host", map[string]string{
			"/proc/self/cgroup":    "4:cpu,cpuacct:/docker/c1\n3:cpuset:/\n0::/\n",
			"/proc/self/mountinfo": mountsHybrid,
			"/sys/fs/cgroup/cpu,cpuacct/docker/c1/cpu.cfs_quota_us":  "250000\n",
			"/sys/fs/cgroup/cpu,cpuacct/docker/c1/cpu.cfs_period_us": "100000\n",
			"/sys/fs/cgroup/cpu,cpuacct/docker/cpu.cfs_quota_us":     "-1\n",
			"/sys/fs/cgroup/cpu,cpuacct/docker/cpu.cfs_period_us":    "100000\n",
		}, 2.5, true},
		{"v1 unlimited", map[string]string{
			"/proc/self/cgroup": "4:cpu,cpuacct:/\n0::/\n", "/proc/self/mountinfo": mountsHybrid,
			"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us":  "-1\n",
			"/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
		}, 0, false},
		{"no cgroup files", map[string]string{}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := quota(files(tc.files))
			if got != tc.want || ok != tc.ok {
				t.Fatalf("quota = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestUnescape(t *testing.T) {
	if got := unescape(`/a\040b`); got != "/a b" {
		t.Fatalf("unescape = %q", got)
	}
}

// TestQuotaHere reads this machine's own files: it must not fail, and a
// limit it finds is positive.
func TestQuotaHere(t *testing.T) {
	q, ok := Quota()
	if ok && q <= 0 {
		t.Fatalf("Quota() = %v, true", q)
	}
	t.Logf("Quota() = %v, %v", q, ok)
}
