package commands

import "strings"

// The error texts redis-server answers a command it cannot run with
// (processCommand in server.c), so that a server or proxy built on the
// table answers as Redis does. Each is an error reply's text without the
// leading '-': resp.AppendError(dst, UnknownCommandError(args)).

// UnknownCommandError is Redis's error for a command it does not have:
// the name and the first arguments, each cut to 128 bytes, the arguments
// to 128 bytes in all ("ERR unknown command 'FOO', with args beginning
// with: 'a' 'b' ").
func UnknownCommandError(args [][]byte) string {
	msg := "ERR unknown command '" + trunc(args[0], 128) + "', with args beginning with: "
	rest := ""
	for _, a := range args[1:] {
		if len(rest) >= 128 {
			break
		}
		rest += "'" + trunc(a, 128-len(rest)) + "' "
	}
	return msg + rest
}

// UnknownSubcommandError is Redis's error for a subcommand sub that the
// container c does not have ("ERR unknown subcommand 'NOSUCH'. Try OBJECT
// HELP.").
func UnknownSubcommandError(c *Command, sub []byte) string {
	return "ERR unknown subcommand '" + trunc(sub, 128) + "'. Try " + strings.ToUpper(c.Name) + " HELP."
}

// ArityError is Redis's error for a command given a number of arguments
// its Arity does not allow ("ERR wrong number of arguments for 'get'
// command"; a subcommand is named "config|get").
func ArityError(c *Command) string {
	return "ERR wrong number of arguments for '" + c.Name + "' command"
}

// NotFoundError is the error for args that Find does not find: an unknown
// subcommand when args[0] is a container of the table and there is a
// subcommand argument, else an unknown command.
func NotFoundError(args [][]byte) string {
	if c := Lookup(args[0]); c != nil && c.Container() && len(args) > 1 {
		return UnknownSubcommandError(c, args[1])
	}
	return UnknownCommandError(args)
}

func trunc(b []byte, n int) string { return string(b[:min(len(b), n)]) }
