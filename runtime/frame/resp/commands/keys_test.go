package commands

import (
	"slices"
	"strings"
	"testing"
)

func argv(s string) [][]byte {
	var out [][]byte
	for _, f := range strings.Fields(s) {
		out = append(out, []byte(f))
	}
	return out
}

// TestKeys: key positions of the shapes a proxy must route by, from the
// committed table (no server needed; TestKeysMatchRedis checks the same
// against redis-server).
func TestKeys(t *testing.T) {
	tests := []struct {
		cmd  string
		want []int // nil with ok false
		ok   bool
	}{
		{"GET k", []int{1}, true},
		{"set k v EX 10", []int{1}, true},
		{"MSET a 1 b 2 c 3", []int{1, 3, 5}, true},
		{"DEL a b c", []int{1, 2, 3}, true},
		{"EVAL s 2 k1 k2 a", []int{3, 4}, true},
		{"EVAL s 0 a", nil, false},
		{"EVAL s x k", nil, false},
		{"EVAL s 5 k", nil, false},
		{"FCALL f 1 k x", []int{3}, true},
		{"LMPOP 2 a b LEFT", []int{2, 3}, true},
		{"ZUNIONSTORE d 2 a b", []int{1, 3, 4}, true},
		{"OBJECT ENCODING k", []int{2}, true},
		{"MEMORY USAGE k", []int{2}, true},
		{"XREAD COUNT 1 STREAMS a b 0 0", []int{4, 5}, true},
		{"XREAD STREAMS a 0", []int{2}, true},
		{"BITOP AND d a b", []int{2, 3, 4}, true},
		{"SORT k BY x", nil, false},
		{"PUBLISH ch m", nil, true},
		{"PING", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			args := argv(tt.cmd)
			c := Find(args)
			if c == nil {
				t.Fatal("not found")
			}
			got, ok := c.Keys(nil, args)
			if ok != tt.ok || !slices.Equal(got, tt.want) {
				t.Fatalf("Keys = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestFind(t *testing.T) {
	tests := []struct{ cmd, want string }{
		{"get", "get"}, {"GeT k", "get"}, {"CONFIG GET maxmemory", "config|get"}, {"config", "config"},
		{"CONFIG NOPE", ""}, {"NOPE", ""}, {"client setname x", "client|setname"}, {"xinfo stream s", "xinfo|stream"},
	}
	for _, tt := range tests {
		c := Find(argv(tt.cmd))
		got := ""
		if c != nil {
			got = c.Name
		}
		if got != tt.want {
			t.Errorf("Find(%q) = %q, want %q", tt.cmd, got, tt.want)
		}
	}
	if c := LookupString("config|get"); c == nil || c.Name != "config|get" {
		t.Errorf("LookupString(config|get) = %v", c)
	}
	if Find(nil) != nil || Lookup([]byte(strings.Repeat("x", 100))) != nil {
		t.Error("Find(nil) or a long name found a command")
	}
}

func TestArityAndFlags(t *testing.T) {
	get, set, mset := LookupString("get"), LookupString("set"), LookupString("mset")
	switch {
	case !get.ArityOK(2) || get.ArityOK(3) || get.ArityOK(1):
		t.Error("GET's arity is exactly 2")
	case !set.ArityOK(3) || !set.ArityOK(7) || set.ArityOK(2):
		t.Error("SET's arity is at least 3")
	case !get.Flags.Has(Readonly|Fast) || get.Flags.Has(Write):
		t.Errorf("GET's flags %v", get.Flags.Names())
	case !mset.Flags.Has(Write | DenyOOM):
		t.Errorf("MSET's flags %v", mset.Flags.Names())
	case !slices.Equal(get.ACL.Names(), []string{"@read", "@string", "@fast"}):
		t.Errorf("GET's ACL categories %v", get.ACL.Names())
	case get.Group != "string" || mset.Since == "":
		t.Errorf("GET's group %q, MSET since %q", get.Group, mset.Since)
	}
	if n := len(All()); n < 200 {
		t.Errorf("%d commands", n)
	}
}

func TestLookupAllocatesNothing(t *testing.T) {
	cfg, mset := argv("CONFIG GET maxmemory"), argv("mset a 1 b 2")
	dst := make([]int, 0, 4)
	n := testing.AllocsPerRun(100, func() {
		if Find(cfg) == nil {
			t.Fatal("CONFIG GET not found")
		}
		dst, _ = Find(mset).Keys(dst[:0], mset)
	})
	if n != 0 {
		t.Errorf("%.0f allocations", n)
	}
}
