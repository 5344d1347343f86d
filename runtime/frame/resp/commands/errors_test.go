package commands_test

import (
	"strings"
	"testing"

	"github.com/percore/percore/runtime/frame/resp/commands"
)

func bs(args ...string) [][]byte {
	out := make([][]byte, len(args))
	for i, a := range args {
		out[i] = []byte(a)
	}
	return out
}

// The texts as redis-server 7.0 answers them (checked with redis-cli: the
// arguments take 128 bytes in all, quotes and spaces counted).
func TestErrorTexts(t *testing.T) {
	long := strings.Repeat("x", 200)
	cases := []struct {
		name string
		got  string
		want string
	}{
		{"unknown command", commands.UnknownCommandError(bs("FOO", "a", "b")),
			"ERR unknown command 'FOO', with args beginning with: 'a' 'b' "},
		{"no arguments", commands.UnknownCommandError(bs("FOO")),
			"ERR unknown command 'FOO', with args beginning with: "},
		{"long name and argument cut to 128", commands.UnknownCommandError(bs(long, long, "c")),
			"ERR unknown command '" + long[:128] + "', with args beginning with: '" + long[:128] + "' "},
		{"arguments cut to 128 in all", commands.UnknownCommandError(bs("FOO", strings.Repeat("a", 100), strings.Repeat("b", 100), "c")),
			"ERR unknown command 'FOO', with args beginning with: '" + strings.Repeat("a", 100) + "' '" + strings.Repeat("b", 25) + "' "},
		{"unknown subcommand", commands.UnknownSubcommandError(commands.LookupString("object"), []byte("NOSUCH")),
			"ERR unknown subcommand 'NOSUCH'. Try OBJECT HELP."},
		{"arity", commands.ArityError(commands.LookupString("get")), "ERR wrong number of arguments for 'get' command"},
		{"arity of a subcommand", commands.ArityError(commands.LookupString("config").Sub([]byte("get"))),
			"ERR wrong number of arguments for 'config|get' command"},
		{"not found: a container's unknown subcommand", commands.NotFoundError(bs("object", "nosuch", "k")),
			"ERR unknown subcommand 'nosuch'. Try OBJECT HELP."},
		{"not found: a container alone", commands.NotFoundError(bs("FOO")),
			"ERR unknown command 'FOO', with args beginning with: "},
		{"not found: a name of no command", commands.NotFoundError(bs("nosuch", "x")),
			"ERR unknown command 'nosuch', with args beginning with: 'x' "},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, tc.got, tc.want)
		}
	}
}
