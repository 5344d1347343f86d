//go:build linux

package main

import (
	"github.com/percore/percore/runtime/frame/resp"
	"github.com/percore/percore/runtime/frame/resp/commands"
)

var (
	replyPong    = []byte("+PONG\r\n")
	replyEmpty   = []byte("*0\r\n")
	replyNoProto = []byte("-NOPROTO unsupported protocol version\r\n")
	replySyntax  = "ERR syntax error"
)

// handler runs a command the table found (c: the command or its
// subcommand), its arity checked.
type handler func(cl *client, c *commands.Command, args [][]byte)

// known is a command this server runs: its entry in Redis's command
// table and its handler.
type known struct {
	cmd *commands.Command
	run handler
}

// supported are the commands this server runs, by lower-case name. Their
// arity, flags and key positions come from Redis's command table
// (runtime/frame/resp/commands, generated from redis-server's COMMAND
// INFO); only what each does is written here.
var supported = func() map[string]known {
	m := map[string]known{}
	for name, h := range map[string]handler{
		"get": (*client).get, "set": (*client).set, "incr": (*client).incr, "decr": (*client).incr,
		"incrby": (*client).incrBy, "decrby": (*client).incrBy, "del": (*client).keys, "exists": (*client).keys,
		"mget": (*client).keys, "mset": (*client).mset, "expire": (*client).expire, "pexpire": (*client).expire,
		"ttl": (*client).ttl, "pttl": (*client).ttl, "ping": (*client).ping, "echo": (*client).echo,
		"dbsize": (*client).dbsize, "flushall": (*client).flushall, "flushdb": (*client).flushall,
		"info": (*client).info, "command": (*client).commandCmd, "hello": (*client).hello,
		"client": (*client).clientCmd, "select": (*client).selectCmd, "config": (*client).config,
		"quit": (*client).quit,
	} {
		c := commands.LookupString(name)
		if c == nil {
			panic("kv: " + name + " is not in Redis's command table")
		}
		m[name] = known{c, h}
	}
	return m
}()

// maxName bounds the command names looked up (Redis's longest is 20
// bytes).
const maxName = 32

// lookup finds a command this server runs by its name, in any case,
// without allocating.
func lookup(name []byte) (known, bool) {
	if len(name) > maxName {
		return known{}, false
	}
	var buf [maxName]byte
	for i, b := range name {
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		buf[i] = b
	}
	k, ok := supported[string(buf[:len(name)])]
	return k, ok
}

// command runs one command, checked against Redis's command table as
// redis-server checks it before running one: unknown command, unknown
// subcommand of a container, arity.
func (cl *client) command(args [][]byte) {
	k, ok := lookup(args[0])
	if !ok {
		cl.sendErr(commands.UnknownCommandError(args))
		return
	}
	c := k.cmd
	if c.Container() && len(args) > 1 {
		if c = c.Sub(args[1]); c == nil {
			cl.sendErr(commands.UnknownSubcommandError(k.cmd, args[1]))
			return
		}
	}
	if !c.ArityOK(len(args)) {
		cl.sendErr(commands.ArityError(c))
		return
	}
	k.run(cl, c, args)
}

func (cl *client) sendErr(msg string) { cl.sendTmp(resp.AppendError(cl.tmp[:0], msg)) }

// sendTmp is Send for a reply built in cl.tmp, which it keeps for the
// next one.
func (cl *client) sendTmp(p []byte) {
	cl.tmp = p
	cl.q.Send(p)
}
