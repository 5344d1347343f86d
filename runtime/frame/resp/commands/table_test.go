//go:build linux

package commands

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"io"
	"net"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
)

var update = flag.Bool("update", false, "write table.go from the running redis-server's COMMAND INFO and COMMAND DOCS")

// TestTableMatchesRedis reads a real redis-server's command table (COMMAND
// INFO and COMMAND DOCS) and compares it, command by command and field by
// field, with the committed table; with -update it writes table.go from it
// instead.
func TestTableMatchesRedis(t *testing.T) {
	r := pctest.StartRedis(t)
	c := dialRedis(t, r.Addr())
	live, version := readTable(t, c)
	if *update {
		src := generate(live, version)
		if err := os.WriteFile("table.go", src, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote table.go: %d commands of redis-server %s", len(live), version)
		return
	}
	if version != Version {
		t.Errorf("redis-server %s, the table is of %s: regenerate it (go test -run TestTableMatchesRedis -update) or install %s", version, Version, Version)
	}
	want := map[string]*Command{}
	for i := range live {
		want[live[i].Name] = &live[i]
	}
	got := map[string]*Command{}
	for i := range table {
		got[table[i].Name] = &table[i]
	}
	for name, w := range want {
		g := got[name]
		if g == nil {
			t.Errorf("redis-server has %q, the table does not", name)
			continue
		}
		compare(t, g, w)
	}
	for name := range got {
		if want[name] == nil {
			t.Errorf("the table has %q, redis-server does not", name)
		}
	}
	if t.Failed() {
		t.Log("the table differs from redis-server's: go test ./runtime/frame/resp/commands -run TestTableMatchesRedis -update")
	}
}

// compare reports every field of g that differs from w's, and recurses
// into the subcommands.
func compare(t *testing.T, g, w *Command) {
	t.Helper()
	gv, wv := reflect.ValueOf(*g), reflect.ValueOf(*w)
	for i := range gv.NumField() {
		f := gv.Type().Field(i)
		if f.Name == "Subcommands" {
			continue
		}
		if !reflect.DeepEqual(gv.Field(i).Interface(), wv.Field(i).Interface()) {
			t.Errorf("%s: %s is %#v in the table, %#v in redis-server", g.Name, f.Name, gv.Field(i).Interface(), wv.Field(i).Interface())
		}
	}
	if len(g.Subcommands) != len(w.Subcommands) {
		t.Errorf("%s: %d subcommands in the table, %d in redis-server", g.Name, len(g.Subcommands), len(w.Subcommands))
		return
	}
	for i := range g.Subcommands {
		if g.Subcommands[i].Name != w.Subcommands[i].Name {
			t.Errorf("%s: subcommand %d is %s in the table, %s in redis-server", g.Name, i, g.Subcommands[i].Name, w.Subcommands[i].Name)
			continue
		}
		compare(t, &g.Subcommands[i], &w.Subcommands[i])
	}
}

// TestKeysMatchRedis checks Keys against redis-server's COMMAND GETKEYS:
// for every command with keys, argument lists built from its arity and key
// specs, and a list of the shapes that routing by args[1] gets wrong.
func TestKeysMatchRedis(t *testing.T) {
	r := pctest.StartRedis(t)
	c := dialRedis(t, r.Addr())
	var cases [][]string
	for i := range table {
		cmd := &table[i]
		if cmd.Container() {
			for j := range cmd.Subcommands {
				cases = append(cases, samples(&cmd.Subcommands[j])...)
			}
			continue
		}
		cases = append(cases, samples(cmd)...)
	}
	cases = append(cases, tricky...)
	checked, own := 0, map[string]bool{}
	for _, args := range cases {
		b := make([][]byte, len(args))
		for i, a := range args {
			b[i] = []byte(a)
		}
		cmd := Find(b)
		if cmd == nil {
			t.Fatalf("%q: not in the table", args)
		}
		if !cmd.ArityOK(len(args)) {
			t.Fatalf("%q: the sample does not fit %s's arity %d", args, cmd.Name, cmd.Arity)
		}
		reply := c.do(t, append([]string{"COMMAND", "GETKEYS"}, args...)...)
		var redisKeys []string
		switch v := reply.(type) {
		case []any:
			for _, k := range v {
				redisKeys = append(redisKeys, k.(string))
			}
		case error:
			if !strings.Contains(v.Error(), "no key arguments") && !strings.Contains(v.Error(), "Invalid arguments") {
				t.Fatalf("COMMAND GETKEYS %q: %v", args, v)
			}
		}
		pos, ok := cmd.Keys(nil, b)
		if !ok {
			// Redis's specs gave up too: its own rule answered, or
			// (without one) no key was found.
			if !needsOwnRule(cmd) && redisKeys != nil {
				t.Errorf("%q: Keys cannot tell, yet %s's specs are complete and Redis finds %q", args, cmd.Name, redisKeys)
			}
			own[cmd.Name] = true
			continue
		}
		var keys []string
		for _, p := range pos {
			keys = append(keys, args[p])
		}
		if !slices.Equal(keys, redisKeys) {
			t.Errorf("%q: Keys finds %q, COMMAND GETKEYS %q", args, keys, redisKeys)
		}
		checked++
	}
	t.Logf("%d argument lists checked against COMMAND GETKEYS; Redis's own rule needed for %d commands: %v", checked, len(own), slices.Sorted(mapKeys(own)))
	if checked < 200 {
		t.Errorf("only %d argument lists checked", checked)
	}
}

func mapKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// needsOwnRule reports whether a command's specs leave some keys to its
// own rule: a spec that is incomplete or unknown.
func needsOwnRule(c *Command) bool {
	for _, s := range c.KeySpecs {
		if s.Flags&KeyIncomplete != 0 || s.Begin == BeginUnknown || s.Find == FindUnknown {
			return true
		}
	}
	return false
}

// tricky are the shapes issue 31 names: keys after a count, after a
// subcommand, after a keyword.
var tricky = [][]string{
	{"EVAL", "return 1", "2", "k1", "k2", "a1"}, {"EVAL", "return 1", "0", "a1"},
	{"EVALSHA", "abc", "1", "k1", "a1"}, {"FCALL", "f", "2", "k1", "k2", "x"}, {"FCALL_RO", "f", "1", "k1"},
	{"LMPOP", "2", "l1", "l2", "LEFT"}, {"BLMPOP", "0", "2", "l1", "l2", "LEFT", "COUNT", "3"},
	{"ZMPOP", "1", "z1", "MIN"}, {"BZMPOP", "1.5", "2", "z1", "z2", "MAX"}, {"SINTERCARD", "3", "s1", "s2", "s3", "LIMIT", "1"},
	{"ZUNION", "2", "z1", "z2", "WEIGHTS", "1", "2"}, {"ZUNIONSTORE", "d", "2", "z1", "z2"}, {"ZINTERCARD", "2", "z1", "z2"},
	{"ZDIFFSTORE", "d", "1", "z1"}, {"OBJECT", "ENCODING", "k"}, {"MEMORY", "USAGE", "k", "SAMPLES", "5"},
	{"XINFO", "STREAM", "s", "FULL"}, {"XINFO", "GROUPS", "s"}, {"BITOP", "AND", "d", "s1", "s2"},
	{"XREAD", "COUNT", "2", "STREAMS", "s1", "s2", "0", "0"}, {"XREADGROUP", "GROUP", "g", "c", "STREAMS", "s1", "0"},
	{"XREAD", "STREAMS", "s1", "s2", "s3", "0", "0", "0"}, {"MSET", "a", "1", "b", "2"}, {"MSETNX", "a", "1"},
	{"DEL", "a", "b", "c"}, {"MGET", "a", "b"}, {"SET", "k", "v", "EX", "10"}, {"GEORADIUS", "g", "0", "0", "1", "km", "STORE", "d"},
	{"SORT", "k", "BY", "w_*", "STORE", "d"}, {"SORT_RO", "k"}, {"MIGRATE", "h", "1", "", "0", "5", "KEYS", "a", "b"},
	{"LCS", "a", "b"}, {"RENAME", "a", "b"}, {"SMOVE", "a", "b", "m"}, {"BLMOVE", "a", "b", "LEFT", "RIGHT", "0"},
	{"PUBLISH", "ch", "m"}, {"SUBSCRIBE", "c1", "c2"}, {"SPUBLISH", "ch", "m"}, {"PFCOUNT", "a", "b"},
	{"GEORADIUSBYMEMBER_RO", "g", "m", "1", "km"}, {"XAUTOCLAIM", "s", "g", "c", "0", "0"}, {"COPY", "a", "b"},
	{"WATCH", "a", "b"}, {"EXISTS", "a", "a"}, {"TOUCH", "a"}, {"UNLINK", "a", "b"}, {"BLPOP", "a", "b", "0"},
}

// samples builds argument lists for c: the shortest its arity allows and
// three longer, with a count where a keynum spec reads one and each
// keyword of a keyword spec placed before the rest.
func samples(c *Command) [][]string {
	if len(c.KeySpecs) == 0 {
		return nil
	}
	name := strings.Split(c.Name, "|")
	n := c.Arity
	extra := []int{0}
	if n < 0 {
		n = -n
		extra = []int{0, 1, 2, 3, 5}
	}
	var out [][]string
	for _, e := range extra {
		args := append([]string(nil), name...)
		for i := len(args); i < n+e; i++ {
			args = append(args, "a"+strconv.Itoa(i))
		}
		for _, s := range c.KeySpecs {
			switch {
			case s.Begin == BeginIndex && s.Find == FindKeynum:
				if at := s.Index + s.KeyNumIdx; at < len(args) {
					args[at] = strconv.Itoa(max(0, min(2, len(args)-at-s.FirstKey)))
				}
			case s.Begin == BeginKeyword && len(args) > 2 && s.StartFrom > 0:
				if at := s.StartFrom + 1; at < len(args)-1 {
					args[at] = s.Keyword
				}
			}
		}
		if len(args) > 1 { // COMMAND GETKEYS takes at least one argument after the name
			out = append(out, args)
		}
	}
	return out
}

// readTable reads the server's command table and version.
func readTable(t *testing.T, c *redisConn) ([]Command, string) {
	t.Helper()
	info := c.do(t, "INFO", "server").(string)
	version := ""
	for _, ln := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(ln, "redis_version:"); ok {
			version = v
		}
	}
	docs := map[string]map[string]any{}
	flat := c.do(t, "COMMAND", "DOCS").([]any)
	for i := 0; i+1 < len(flat); i += 2 {
		docs[flat[i].(string)] = pairs(flat[i+1])
	}
	var out []Command
	for _, e := range c.do(t, "COMMAND").([]any) {
		cmd := fromInfo(t, e.([]any))
		applyDocs(t, &cmd, docs[cmd.Name])
		out = append(out, cmd)
	}
	slices.SortFunc(out, func(a, b Command) int { return strings.Compare(a.Name, b.Name) })
	return out, version
}

// pairs reads a RESP2 flat map.
func pairs(v any) map[string]any {
	m := map[string]any{}
	a, _ := v.([]any)
	for i := 0; i+1 < len(a); i += 2 {
		m[a[i].(string)] = a[i+1]
	}
	return m
}

func fromInfo(t *testing.T, e []any) Command {
	t.Helper()
	c := Command{
		Name:     e[0].(string),
		Arity:    int(e[1].(int64)),
		FirstKey: int(e[3].(int64)),
		LastKey:  int(e[4].(int64)),
		Step:     int(e[5].(int64)),
	}
	c.Flags = Flags(bits(t, c.Name, e[2], flagNames[:], ""))
	c.ACL = Categories(bits(t, c.Name, e[6], categoryNames[:], "@"))
	for _, tip := range e[7].([]any) {
		c.Tips = append(c.Tips, tip.(string))
	}
	for _, s := range e[8].([]any) {
		c.KeySpecs = append(c.KeySpecs, keySpec(t, c.Name, pairs(s)))
	}
	for _, s := range e[9].([]any) {
		c.Subcommands = append(c.Subcommands, fromInfo(t, s.([]any)))
	}
	slices.SortFunc(c.Subcommands, func(a, b Command) int { return strings.Compare(a.Name, b.Name) })
	return c
}

func applyDocs(t *testing.T, c *Command, d map[string]any) {
	t.Helper()
	if d == nil {
		t.Fatalf("%s: no COMMAND DOCS entry", c.Name)
	}
	str := func(k string) string { s, _ := d[k].(string); return s }
	c.Summary, c.Since, c.Group, c.Complexity = str("summary"), str("since"), str("group"), str("complexity")
	c.DeprecatedSince, c.ReplacedBy = str("deprecated_since"), str("replaced_by")
	if f, ok := d["doc_flags"]; ok {
		c.Doc = DocFlags(bits(t, c.Name, f, docFlagNames[:], ""))
	}
	subs := pairs(d["subcommands"])
	for i := range c.Subcommands {
		applyDocs(t, &c.Subcommands[i], pairs(subs[c.Subcommands[i].Name]))
	}
}

func keySpec(t *testing.T, name string, m map[string]any) KeySpec {
	t.Helper()
	var s KeySpec
	s.Notes, _ = m["notes"].(string)
	s.Flags = KeyFlags(bits(t, name, m["flags"], keyFlagNames[:], ""))
	bs := pairs(m["begin_search"])
	spec := pairs(bs["spec"])
	num := func(m map[string]any, k string) int { n, _ := m[k].(int64); return int(n) }
	switch bs["type"] {
	case "index":
		s.Begin, s.Index = BeginIndex, num(spec, "index")
	case "keyword":
		s.Begin, s.StartFrom = BeginKeyword, num(spec, "startfrom")
		s.Keyword, _ = spec["keyword"].(string)
	case "unknown":
	default:
		t.Fatalf("%s: begin_search type %v: the table has no such kind; add it", name, bs["type"])
	}
	fk := pairs(m["find_keys"])
	spec = pairs(fk["spec"])
	switch fk["type"] {
	case "range":
		s.Find, s.LastKey, s.KeyStep, s.Limit = FindRange, num(spec, "lastkey"), num(spec, "keystep"), num(spec, "limit")
	case "keynum":
		s.Find, s.KeyNumIdx, s.FirstKey, s.KeyStep = FindKeynum, num(spec, "keynumidx"), num(spec, "firstkey"), num(spec, "keystep")
	case "unknown":
	default:
		t.Fatalf("%s: find_keys type %v: the table has no such kind; add it", name, fk["type"])
	}
	return s
}

// bits turns a list of names into a bit set over list; a name the table
// has no constant for fails the test, so that a new Redis flag is added
// on purpose.
func bits(t *testing.T, cmd string, v any, list []string, prefix string) uint64 {
	t.Helper()
	var b uint64
	for _, e := range v.([]any) {
		n := strings.TrimPrefix(e.(string), prefix)
		i := slices.Index(list, n)
		if i < 0 {
			t.Fatalf("%s: %q is not a name the table knows (%v): add a constant for it", cmd, e, list)
		}
		b |= 1 << i
	}
	return b
}

// The Go names of the constants, by bit, for generate.
var (
	flagIdents = [...]string{"Write", "Readonly", "DenyOOM", "Module", "Admin", "Pubsub", "Noscript", "Blocking",
		"Loading", "Stale", "SkipMonitor", "SkipSlowlog", "Asking", "Fast", "NoAuth", "NoMandatoryKeys",
		"NoAsyncLoading", "NoMulti", "MovableKeys", "AllowBusy"}
	categoryIdents = [...]string{"ACLKeyspace", "ACLRead", "ACLWrite", "ACLSet", "ACLSortedSet", "ACLList", "ACLHash",
		"ACLString", "ACLBitmap", "ACLHyperLogLog", "ACLGeo", "ACLStream", "ACLPubsub", "ACLAdmin", "ACLFast",
		"ACLSlow", "ACLBlocking", "ACLDangerous", "ACLConnection", "ACLTransaction", "ACLScripting"}
	docIdents     = [...]string{"Deprecated", "Syscmd"}
	keyFlagIdents = [...]string{"KeyRO", "KeyRW", "KeyOW", "KeyRM", "KeyAccess", "KeyUpdate", "KeyInsert", "KeyDelete",
		"KeyNotKey", "KeyIncomplete", "KeyVariableFlags"}
)

func orIdents(b uint64, idents []string) string {
	var parts []string
	for i, id := range idents {
		if b&(1<<i) != 0 {
			parts = append(parts, id)
		}
	}
	return strings.Join(parts, " | ")
}

// generate writes table.go's source.
func generate(cmds []Command, version string) []byte {
	var b bytes.Buffer
	b.WriteString("// Code generated by go test -run TestTableMatchesRedis -update; DO NOT EDIT.\n\n")
	fmt.Fprintf(&b, "package commands\n\n// tableVersion is the redis-server version table was read from.\nconst tableVersion = %q\n\n", version)
	b.WriteString("// table is redis-server's COMMAND INFO and COMMAND DOCS, sorted by name.\nvar table = []Command{\n")
	for i := range cmds {
		writeCommand(&b, &cmds[i])
	}
	b.WriteString("}\n")
	src, err := format.Source(b.Bytes())
	if err != nil {
		panic(fmt.Sprintf("generated table.go does not parse: %v", err))
	}
	return src
}

func writeCommand(b *bytes.Buffer, c *Command) {
	fmt.Fprintf(b, "{Name: %q, Arity: %d", c.Name, c.Arity)
	if c.Flags != 0 {
		fmt.Fprintf(b, ", Flags: %s", orIdents(uint64(c.Flags), flagIdents[:]))
	}
	if c.FirstKey != 0 || c.LastKey != 0 || c.Step != 0 {
		fmt.Fprintf(b, ", FirstKey: %d, LastKey: %d, Step: %d", c.FirstKey, c.LastKey, c.Step)
	}
	if c.ACL != 0 {
		fmt.Fprintf(b, ", ACL: %s", orIdents(uint64(c.ACL), categoryIdents[:]))
	}
	b.WriteString(",\n")
	if len(c.Tips) > 0 {
		fmt.Fprintf(b, "Tips: %#v,\n", c.Tips)
	}
	if len(c.KeySpecs) > 0 {
		b.WriteString("KeySpecs: []KeySpec{\n")
		for _, s := range c.KeySpecs {
			b.WriteString("{")
			if s.Notes != "" {
				fmt.Fprintf(b, "Notes: %q, ", s.Notes)
			}
			if s.Flags != 0 {
				fmt.Fprintf(b, "Flags: %s, ", orIdents(uint64(s.Flags), keyFlagIdents[:]))
			}
			switch s.Begin {
			case BeginIndex:
				fmt.Fprintf(b, "Begin: BeginIndex, Index: %d, ", s.Index)
			case BeginKeyword:
				fmt.Fprintf(b, "Begin: BeginKeyword, Keyword: %q, StartFrom: %d, ", s.Keyword, s.StartFrom)
			}
			switch s.Find {
			case FindRange:
				fmt.Fprintf(b, "Find: FindRange, LastKey: %d, KeyStep: %d, Limit: %d", s.LastKey, s.KeyStep, s.Limit)
			case FindKeynum:
				fmt.Fprintf(b, "Find: FindKeynum, KeyNumIdx: %d, FirstKey: %d, KeyStep: %d", s.KeyNumIdx, s.FirstKey, s.KeyStep)
			}
			b.WriteString("},\n")
		}
		b.WriteString("},\n")
	}
	for _, f := range []struct{ name, v string }{{"Summary", c.Summary}, {"Since", c.Since}, {"Group", c.Group},
		{"Complexity", c.Complexity}, {"DeprecatedSince", c.DeprecatedSince}, {"ReplacedBy", c.ReplacedBy}} {
		if f.v != "" {
			fmt.Fprintf(b, "%s: %q, ", f.name, f.v)
		}
	}
	if c.Doc != 0 {
		fmt.Fprintf(b, "Doc: %s, ", orIdents(uint64(c.Doc), docIdents[:]))
	}
	b.WriteString("\n")
	if len(c.Subcommands) > 0 {
		b.WriteString("Subcommands: []Command{\n")
		for i := range c.Subcommands {
			writeCommand(b, &c.Subcommands[i])
		}
		b.WriteString("},\n")
	}
	b.WriteString("},\n")
}

// redisConn is a minimal RESP2 client for the tests.
type redisConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialRedis(t *testing.T, addr string) *redisConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &redisConn{c: c, r: bufio.NewReader(c)}
}

// do sends a command and returns its reply: a string, an int64, a []any,
// nil, or an error for an error reply.
func (rc *redisConn) do(t *testing.T, args ...string) any {
	t.Helper()
	var b []byte
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, "\r\n"...)
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, "\r\n"...)
		b = append(b, a...)
		b = append(b, "\r\n"...)
	}
	rc.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := rc.c.Write(b); err != nil {
		t.Fatal(err)
	}
	v, err := rc.read()
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return v
}

func (rc *redisConn) read() (any, error) {
	line, err := rc.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply line")
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return errors.New(body), nil
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		p := make([]byte, n+2)
		if _, err := io.ReadFull(rc.r, p); err != nil {
			return nil, err
		}
		return string(p[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return nil, err
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = rc.read(); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("reply type %q", line[0])
}
