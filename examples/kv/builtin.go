//go:build linux

package main

import (
	"strconv"
	"time"

	"github.com/percore/percore/runtime/frame/resp"
	"github.com/percore/percore/runtime/frame/resp/commands"
)

func (cl *client) ping(_ *commands.Command, args [][]byte) {
	switch len(args) {
	case 1:
		cl.q.Send(replyPong)
	case 2:
		cl.sendTmp(resp.AppendBulk(cl.tmp[:0], args[1]))
	default:
		cl.sendErr("ERR wrong number of arguments for 'ping' command")
	}
}

func (cl *client) echo(_ *commands.Command, args [][]byte) {
	cl.sendTmp(resp.AppendBulk(cl.tmp[:0], args[1]))
}

func (cl *client) selectCmd(_ *commands.Command, args [][]byte) {
	if string(args[1]) == "0" {
		cl.q.Send(replyOK)
	} else {
		cl.sendErr("ERR DB index is out of range")
	}
}

func (cl *client) quit(*commands.Command, [][]byte) {
	cl.q.Send(replyOK)
	cl.q.CloseWhenDone()
}

// hello answers HELLO [protover [AUTH user pass] [SETNAME name]]: RESP2
// or RESP3, from then on. The server has no users and keeps no names:
// AUTH and SETNAME are read, as Redis reads them, and accepted.
func (cl *client) hello(_ *commands.Command, args [][]byte) {
	resp3 := cl.resp3
	if len(args) >= 2 {
		v, ok := resp.ParseInt(args[1])
		switch {
		case !ok:
			cl.sendErr("ERR Protocol version is not an integer or out of range")
			return
		case v != 2 && v != 3:
			cl.q.Send(replyNoProto)
			return
		}
		resp3 = v == 3
	}
	for j := 2; j < len(args); j++ {
		more := len(args) - 1 - j
		switch {
		case resp.EqualFold(args[j], "AUTH") && more >= 2:
			j += 2
		case resp.EqualFold(args[j], "SETNAME") && more >= 1:
			j++
		default:
			cl.sendErr("ERR Syntax error in HELLO option '" + string(args[j]) + "'")
			return
		}
	}
	cl.resp3 = resp3
	if cl.resp3 {
		cl.q.Send(hello3)
	} else {
		cl.q.Send(hello2)
	}
}

// hello is HELLO's reply, in RESP2 (an array) or RESP3 (a map).
func hello(resp3 bool) []byte {
	var b []byte
	if resp3 {
		b = append(b, "%7\r\n"...)
	} else {
		b = resp.AppendArray(b, 14)
	}
	for _, kv := range [][2]string{{"server", "percore-kv"}, {"version", "7.0.15"}} {
		b = resp.AppendBulkString(resp.AppendBulkString(b, kv[0]), kv[1])
	}
	proto := int64(2)
	if resp3 {
		proto = 3
	}
	b = resp.AppendInt(resp.AppendBulkString(b, "proto"), proto)
	b = resp.AppendInt(resp.AppendBulkString(b, "id"), 1)
	for _, kv := range [][2]string{{"mode", "standalone"}, {"role", "master"}} {
		b = resp.AppendBulkString(resp.AppendBulkString(b, kv[0]), kv[1])
	}
	return resp.AppendArray(resp.AppendBulkString(b, "modules"), 0)
}

var hello2, hello3 = hello(false), hello(true)

// clientCmd accepts CLIENT SETNAME and the like: the server keeps no
// client names, but clients that set one must start.
func (cl *client) clientCmd(c *commands.Command, _ [][]byte) {
	switch c.Name {
	case "client|getname":
		cl.q.Send(null(cl.resp3))
	case "client|id":
		cl.sendTmp(resp.AppendInt(cl.tmp[:0], int64(cl.c.Fd())))
	default:
		cl.q.Send(replyOK)
	}
}

func (cl *client) dbsize(*commands.Command, [][]byte) { cl.everyLoop(kStats, joinSum, false) }

func (cl *client) flushall(_ *commands.Command, args [][]byte) {
	if len(args) > 2 || len(args) == 2 && !resp.EqualFold(args[1], "SYNC") && !resp.EqualFold(args[1], "ASYNC") {
		cl.sendErr(replySyntax)
		return
	}
	cl.everyLoop(kFlush, joinOK, false)
}

func (cl *client) info(*commands.Command, [][]byte) { cl.everyLoop(kStats, joinSum, true) }

// info is INFO's reply: a few fields of Redis's sections.
func (s *server) info(dst []byte, st counts) []byte {
	policy := "noeviction"
	if s.evict {
		policy = "allkeys-random"
	}
	body := "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\nprocess_id:" + strconv.Itoa(osPid) +
		"\r\nuptime_in_seconds:" + strconv.FormatInt(int64(time.Since(s.started)/time.Second), 10) +
		"\r\nio_threads_active:0\r\npercore_loops:" + strconv.Itoa(s.nLoop) +
		"\r\n\r\n# Memory\r\nused_memory:" + strconv.FormatInt(st.used, 10) +
		"\r\nmaxmemory:" + strconv.FormatInt(s.maxMemory, 10) +
		"\r\nmaxmemory_policy:" + policy +
		"\r\n\r\n# Stats\r\npercore_key_commands:" + strconv.FormatInt(st.commands, 10) +
		"\r\npercore_cross_loop_commands:" + strconv.FormatInt(st.remote, 10) +
		"\r\npercore_parsed_bytes:" + strconv.FormatInt(st.parsed, 10) +
		"\r\nexpired_keys:" + strconv.FormatInt(st.expired, 10) +
		"\r\nevicted_keys:" + strconv.FormatInt(st.evicted, 10) +
		"\r\n\r\n# Keyspace\r\n"
	if st.keys > 0 {
		body += "db0:keys=" + strconv.FormatInt(st.keys, 10) + ",expires=" + strconv.FormatInt(st.expires, 10) + ",avg_ttl=0\r\n"
	}
	return resp.AppendBulkString(dst, body)
}

// commandCmd answers COMMAND COUNT with the number of commands the server
// runs, and COMMAND, COMMAND DOCS and the rest with what redis-cli and
// redis-benchmark need to start: an empty array.
func (cl *client) commandCmd(c *commands.Command, _ [][]byte) {
	if c.Name == "command|count" {
		cl.sendTmp(resp.AppendInt(cl.tmp[:0], int64(cl.s.nCommands)))
		return
	}
	cl.q.Send(replyEmpty)
}

// configCmd is CONFIG, for the error of a subcommand config does not run.
var configCmd = commands.LookupString("config")

// config answers CONFIG GET of what redis-benchmark asks (save,
// appendonly) as a server without persistence would, and maxmemory; the
// other subcommands are not this server's.
func (cl *client) config(c *commands.Command, args [][]byte) {
	if c.Name != "config|get" {
		cl.sendErr(commands.UnknownSubcommandError(configCmd, args[1]))
		return
	}
	if len(args) != 3 {
		cl.q.Send(replyEmpty)
		return
	}
	value := ""
	switch string(args[2]) {
	case "save":
	case "appendonly":
		value = "no"
	case "maxmemory":
		value = strconv.FormatInt(cl.s.maxMemory, 10)
	default:
		cl.q.Send(replyEmpty)
		return
	}
	b := resp.AppendBulk(resp.AppendArray(cl.tmp[:0], 2), args[2])
	cl.sendTmp(resp.AppendBulkString(b, value))
}
