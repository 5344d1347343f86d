package commands

import (
	"strings"
	"sync"
)

// Command is one entry of Redis's command table: a command, or a
// container's subcommand ("config|get"), as COMMAND INFO and COMMAND DOCS
// describe it. The table's Commands are shared and read-only.
type Command struct {
	// Name is the command's full name in lower case: "get", or for a
	// subcommand the container's name, '|' and the subcommand's
	// ("config|get"), as Redis names it in its errors.
	Name string
	// Arity is the number of arguments, the name (and a subcommand's
	// name) included: N exactly when positive, at least -N when
	// negative.
	Arity int
	// Flags are the command's flags (write, readonly, denyoom, ...).
	Flags Flags
	// FirstKey, LastKey and Step are the legacy key positions of
	// COMMAND INFO (0 0 0: none; a negative LastKey counts from the end).
	// KeySpecs say more, and Keys follows them.
	FirstKey, LastKey, Step int
	// ACL is the command's ACL categories (@read, @write, ...).
	ACL Categories
	// Tips are the command's tips for clients and proxies, as Redis
	// writes them ("nondeterministic_output", "request_policy:all_shards").
	Tips []string
	// KeySpecs say where the keys are among the arguments and how the
	// command uses them.
	KeySpecs []KeySpec
	// Subcommands are a container's subcommands (CONFIG's GET, SET, ...),
	// sorted by Name.
	Subcommands []Command

	// Summary, Since, Group and Complexity are COMMAND DOCS' fields of
	// the same names; Group is the documentation group ("string",
	// "server", "pubsub", ...).
	Summary, Since, Group, Complexity string
	// Doc holds COMMAND DOCS' doc_flags.
	Doc DocFlags
	// DeprecatedSince and ReplacedBy are set for a deprecated command.
	DeprecatedSince, ReplacedBy string
}

// Flags is a set of a command's flags, as COMMAND INFO lists them.
type Flags uint32

// The command flags of COMMAND INFO, in Redis's order.
const (
	Write           Flags = 1 << iota // write: may modify the keyspace
	Readonly                          // readonly: reads keys only
	DenyOOM                           // denyoom: refused once used memory is over maxmemory
	Module                            // module: a module's command
	Admin                             // admin: an administrative command
	Pubsub                            // pubsub: a pub/sub command
	Noscript                          // noscript: not allowed in scripts
	Blocking                          // blocking: may block the client
	Loading                           // loading: allowed while the dataset loads
	Stale                             // stale: allowed on a replica with stale data
	SkipMonitor                       // skip_monitor: not shown to MONITOR
	SkipSlowlog                       // skip_slowlog: not logged by the slow log
	Asking                            // asking: cluster ASKING
	Fast                              // fast: O(1) or O(log N)
	NoAuth                            // no_auth: allowed before AUTH
	NoMandatoryKeys                   // no_mandatory_keys: may take no key
	NoAsyncLoading                    // no_async_loading: refused during an async load
	NoMulti                           // no_multi: not allowed in MULTI
	MovableKeys                       // movablekeys: the keys' positions depend on the arguments
	AllowBusy                         // allow_busy: allowed while a script is busy
)

var flagNames = [...]string{"write", "readonly", "denyoom", "module", "admin", "pubsub", "noscript",
	"blocking", "loading", "stale", "skip_monitor", "skip_slowlog", "asking", "fast", "no_auth",
	"no_mandatory_keys", "no_async_loading", "no_multi", "movablekeys", "allow_busy"}

// Has reports whether every flag of x is in f.
func (f Flags) Has(x Flags) bool { return f&x == x }

// Names returns the flags' names, as COMMAND INFO writes them, in order.
func (f Flags) Names() []string { return names(uint64(f), flagNames[:]) }

// Categories is a set of ACL categories.
type Categories uint32

// The ACL categories, without their '@'.
const (
	ACLKeyspace Categories = 1 << iota
	ACLRead
	ACLWrite
	ACLSet
	ACLSortedSet
	ACLList
	ACLHash
	ACLString
	ACLBitmap
	ACLHyperLogLog
	ACLGeo
	ACLStream
	ACLPubsub
	ACLAdmin
	ACLFast
	ACLSlow
	ACLBlocking
	ACLDangerous
	ACLConnection
	ACLTransaction
	ACLScripting
)

var categoryNames = [...]string{"keyspace", "read", "write", "set", "sortedset", "list", "hash",
	"string", "bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow",
	"blocking", "dangerous", "connection", "transaction", "scripting"}

// Has reports whether every category of x is in c.
func (c Categories) Has(x Categories) bool { return c&x == x }

// Names returns the categories' names with their '@', as COMMAND INFO
// writes them.
func (c Categories) Names() []string {
	out := names(uint64(c), categoryNames[:])
	for i := range out {
		out[i] = "@" + out[i]
	}
	return out
}

// DocFlags are COMMAND DOCS' doc_flags.
type DocFlags uint8

const (
	Deprecated DocFlags = 1 << iota // deprecated
	Syscmd                          // syscmd: a command not meant for clients (REPLCONF, PSYNC, ...)
)

var docFlagNames = [...]string{"deprecated", "syscmd"}

// Names returns the doc flags' names.
func (d DocFlags) Names() []string { return names(uint64(d), docFlagNames[:]) }

// KeyFlags are a key spec's flags: how the command uses its keys.
type KeyFlags uint16

// The key spec flags of COMMAND INFO.
const (
	KeyRO            KeyFlags = 1 << iota // RO: read only
	KeyRW                                 // RW: read and write
	KeyOW                                 // OW: overwrite
	KeyRM                                 // RM: remove
	KeyAccess                             // access: the value is returned, copied or used
	KeyUpdate                             // update: the value is updated
	KeyInsert                             // insert: a value is added
	KeyDelete                             // delete: a value is deleted
	KeyNotKey                             // not_key: not a key (a channel name), skipped by Keys
	KeyIncomplete                         // incomplete: the spec may miss keys
	KeyVariableFlags                      // variable_flags: the flags depend on the arguments
)

var keyFlagNames = [...]string{"RO", "RW", "OW", "RM", "access", "update", "insert", "delete",
	"not_key", "incomplete", "variable_flags"}

// Has reports whether every flag of x is in f.
func (f KeyFlags) Has(x KeyFlags) bool { return f&x == x }

// Names returns the flags' names, as COMMAND INFO writes them.
func (f KeyFlags) Names() []string { return names(uint64(f), keyFlagNames[:]) }

// BeginSearch is how a key spec finds its first key (begin_search).
type BeginSearch uint8

const (
	// BeginUnknown: the spec cannot find its keys (the command's own
	// rule does: SORT's BY and STORE, say).
	BeginUnknown BeginSearch = iota
	// BeginIndex: the keys begin at argument Index.
	BeginIndex
	// BeginKeyword: the keys begin after the argument Keyword, looked
	// for from argument StartFrom (counted from the end when negative).
	BeginKeyword
)

// FindKeys is how a key spec finds its keys from the first (find_keys).
type FindKeys uint8

const (
	// FindUnknown: the spec cannot tell.
	FindUnknown FindKeys = iota
	// FindRange: LastKey is the last key's offset from the first (a
	// negative one counts from the end; with Limit set, the keys are
	// the first 1/Limit of the rest), every KeyStep arguments.
	FindRange
	// FindKeynum: the number of keys is the argument KeyNumIdx after
	// the begin; the keys start FirstKey after the begin, every KeyStep
	// arguments.
	FindKeynum
)

// KeySpec is one of a command's key specs (Redis 7's key-specs).
type KeySpec struct {
	Notes string
	Flags KeyFlags

	Begin     BeginSearch
	Index     int    // BeginIndex
	Keyword   string // BeginKeyword
	StartFrom int    // BeginKeyword

	Find      FindKeys
	LastKey   int // FindRange
	Limit     int // FindRange
	KeyNumIdx int // FindKeynum
	FirstKey  int // FindKeynum
	KeyStep   int // FindRange, FindKeynum
}

func names(bits uint64, list []string) []string {
	var out []string
	for i, n := range list {
		if bits&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return out
}

// ArityOK reports whether argc arguments (the name included) fit the
// command's arity, as Redis checks it before running a command.
func (c *Command) ArityOK(argc int) bool {
	if c.Arity >= 0 {
		return argc == c.Arity
	}
	return argc >= -c.Arity
}

// Container reports whether the command is a container of subcommands
// (CONFIG, CLIENT, OBJECT, ...).
func (c *Command) Container() bool { return len(c.Subcommands) > 0 }

// Sub returns the container's subcommand named name (any case), or nil.
func (c *Command) Sub(name []byte) *Command {
	for i := range c.Subcommands {
		s := &c.Subcommands[i]
		if equalFold(s.Name[len(c.Name)+1:], name) {
			return s
		}
	}
	return nil
}

// Keys appends to dst the indexes in args (args[0] is the command's name)
// of the arguments that are keys, as Redis's key specs find them (its
// getKeysUsingKeySpecs), and returns the extended slice. ok is false
// exactly where Redis's specs give up and Redis falls back to the
// command's own rule: a spec that is incomplete or unknown (SORT's BY and
// STORE, MIGRATE's KEYS), a key count that is not a positive number (EVAL
// with numkeys 0: Redis's own rule finds no key), or arguments that do not
// reach the spec's keys (PFMERGE with no source key); dst is returned
// unchanged then. Arguments that are not keys (not_key: channels) are
// skipped. A command without key specs has no keys (ok true). Keys gives
// positions only: where a spec's flags vary with the arguments
// (KeyVariableFlags: SET with GET reads the key too) Redis runs the
// command's own rule for the flags, at the same positions.
func (c *Command) Keys(dst []int, args [][]byte) (keys []int, ok bool) {
	start := len(dst)
	argc := len(args)
	for i := range c.KeySpecs {
		s := &c.KeySpecs[i]
		if s.Flags&KeyNotKey != 0 {
			continue
		}
		first := 0
		switch s.Begin {
		case BeginIndex:
			first = s.Index
		case BeginKeyword:
			// Redis's search: from StartFrom (from the end when it is
			// not positive) towards the other end, the end excluded.
			from, to := s.StartFrom, argc-1
			if s.StartFrom <= 0 {
				from, to = argc+s.StartFrom, 1
			}
			step := 1
			if from > to {
				step = -1
			}
			for j := from; j != to; j += step {
				if j >= argc || j < 1 {
					break
				}
				if equalFold(s.Keyword, args[j]) {
					first = j + 1
					break
				}
			}
			if first == 0 {
				continue // the keyword is not there: no keys of this spec
			}
		default:
			return dst[:start], false
		}
		last, step := 0, 0
		switch s.Find {
		case FindRange:
			step = s.KeyStep
			switch {
			case s.LastKey >= 0:
				last = first + s.LastKey
			case s.Limit == 0:
				last = argc + s.LastKey
			default:
				last = first + (argc-first)/s.Limit + s.LastKey
			}
		case FindKeynum:
			step = s.KeyStep
			at := first + s.KeyNumIdx
			if at >= argc || at < 0 {
				return dst[:start], false
			}
			n, isNum := parseCount(args[at])
			if !isNum {
				return dst[:start], false
			}
			first += s.FirstKey
			last = first + int(n) - 1
		default:
			return dst[:start], false
		}
		if last >= argc || last < first || first >= argc {
			return dst[:start], false
		}
		if step <= 0 {
			return dst[:start], false
		}
		for j := first; j <= last; j += step {
			dst = append(dst, j)
		}
		if s.Flags&KeyIncomplete != 0 {
			return dst[:start], false
		}
	}
	return dst, true
}

// Version is the redis-server version the table was generated from.
const Version = tableVersion

// All returns the table: every command, sorted by name, each with its
// subcommands. The slice and the Commands are shared: do not modify them.
func All() []Command { return table }

// byName indexes the top-level commands by their lower-case name.
var byName = sync.OnceValue(func() map[string]*Command {
	m := make(map[string]*Command, len(table))
	for i := range table {
		m[table[i].Name] = &table[i]
	}
	return m
})

// maxName bounds the names Lookup lowers on the stack.
const maxName = 32

// Lookup returns the top-level command named name (any case), or nil.
// It does not allocate.
func Lookup(name []byte) *Command {
	if len(name) > maxName {
		return nil
	}
	var buf [maxName]byte
	for i, b := range name {
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		buf[i] = b
	}
	return byName()[string(buf[:len(name)])]
}

// LookupString is Lookup for a string name; a subcommand may be named
// in full ("config|get").
func LookupString(name string) *Command {
	base, sub, isSub := strings.Cut(name, "|")
	c := Lookup([]byte(base))
	if c == nil || !isSub {
		return c
	}
	return c.Sub([]byte(sub))
}

// Find returns the command args names, as Redis's command lookup finds it:
// args[0]'s command, or for a container given a second argument, the
// subcommand args[1] names (nil when it has none of that name). It returns
// nil for an unknown command or no arguments. It does not allocate.
func Find(args [][]byte) *Command {
	if len(args) == 0 {
		return nil
	}
	c := Lookup(args[0])
	if c == nil || len(args) == 1 || !c.Container() {
		return c
	}
	return c.Sub(args[1])
}

// equalFold reports whether b is s, ASCII case-insensitive.
func equalFold(s string, b []byte) bool {
	if len(s) != len(b) {
		return false
	}
	for i := range len(b) {
		x, y := s[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// parseCount parses a key count as Redis's string2ll does (decimal, no
// sign, no leading zero), up to 1<<30.
func parseCount(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 10 || len(b) > 1 && b[0] == '0' {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n <= 1<<30
}
