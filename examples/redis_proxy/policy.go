//go:build linux

package main

import (
	"strings"
	"sync"

	"github.com/percore/percore/runtime/frame/resp/commands"
)

// rule is what the proxy does with one command of Redis's command table
// (runtime/frame/resp/commands, as redis-server's COMMAND INFO and COMMAND
// DOCS report it). It is derived from the table's fields, once, by ruleOf:
// nothing here names a command the table could describe.
type rule struct {
	// refuse, when not "", is why the proxy does not forward the command:
	// the text after "ERR command 'X' is not supported by the proxy: ".
	refuse string
	// split says a command whose keys belong to several servers is sent
	// as one command per key (each with the arguments up to the next key)
	// and its replies joined by join. Without it, keys on several servers
	// are refused (CROSSSLOT).
	split bool
	join  joinMode
}

// The reasons a command is refused, each from a field of the table.
const (
	// Flags pubsub with noscript: the (un)subscribe commands. They
	// answer once per channel (SUNSUBSCRIBE c1 c2 is two replies; with
	// no channel, one per subscription the connection has), and then the
	// connection is in subscribed mode: on a connection shared by every
	// client, each extra reply would be handed to the next client's
	// request. PUBLISH and PUBSUB's subcommands are pubsub but allowed in
	// scripts: one reply each, forwarded by their keys (SPUBLISH) or
	// refused as keyless.
	whySubscribes = "it subscribes the connection and replies once per channel"
	// Flags admin, or COMMAND DOCS' syscmd: administration and the
	// replication protocol (REPLCONF ACK has no reply, SYNC and PSYNC
	// answer with a stream, MONITOR streams every command, SHUTDOWN and
	// FAILOVER stop or demote a server, DEBUG can crash it).
	whyAdmin = "an administrative or replication command, not a client's"
	// Flags blocking: blocks the connection until a key changes or a
	// timeout, and every other client's replies on it wait behind.
	whyBlocks = "it may block the connection, which every client shares"
	// ACL categories @connection and @transaction: the command changes
	// or reads the state of the connection (AUTH, SELECT, CLIENT REPLY,
	// RESET, READONLY, MULTI, WATCH, ...), which is not the client's but
	// the pool's. The proxy answers PING, ECHO, QUIT and a few more
	// itself (proxy.command).
	whyConnection = "it uses the state of the connection, which every client shares"
	// Tips request_policy:all_shards, all_nodes or special: Redis
	// Cluster sends the command to every shard (KEYS, SCAN, DBSIZE,
	// FLUSHALL, SCRIPT LOAD, INFO, ...); the proxy does not.
	whyAllServers = "it spans every server"
)

// ruleOf derives the command's rule from its entry in the table.
func ruleOf(c *commands.Command) rule {
	f := c.Flags
	switch {
	case f.Has(commands.Pubsub) && f.Has(commands.Noscript):
		return rule{refuse: whySubscribes}
	case f.Has(commands.Admin) || c.Doc&commands.Syscmd != 0:
		return rule{refuse: whyAdmin}
	case f.Has(commands.Blocking):
		return rule{refuse: whyBlocks}
	case c.ACL&(commands.ACLConnection|commands.ACLTransaction) != 0:
		return rule{refuse: whyConnection}
	}
	var r rule
	for _, tip := range c.Tips {
		switch tip {
		case "request_policy:all_shards", "request_policy:all_nodes", "request_policy:special":
			return rule{refuse: whyAllServers}
		case "request_policy:multi_shard":
			r.split, r.join = true, joinArray // no response policy: the parts' arrays in key order
		}
	}
	if r.split {
		for _, tip := range c.Tips {
			switch tip {
			case "response_policy:agg_sum":
				r.join = joinSum
			case "response_policy:all_succeeded":
				r.join = joinOK
			case "response_policy:agg_min", "response_policy:agg_max", "response_policy:agg_logical_and",
				"response_policy:agg_logical_or", "response_policy:one_succeeded", "response_policy:special":
				// MSETNX (agg_min): all or nothing, which parts on
				// several servers cannot be. Keys on one server only.
				r.split = false
			}
		}
	}
	return r
}

// rules holds every command's rule, derived once from the table.
var rules = sync.OnceValue(func() map[*commands.Command]rule {
	m := map[*commands.Command]rule{}
	var add func(c *commands.Command)
	add = func(c *commands.Command) {
		m[c] = ruleOf(c)
		for i := range c.Subcommands {
			add(&c.Subcommands[i])
		}
	}
	all := commands.All()
	for i := range all {
		add(&all[i])
	}
	return m
})

// refusal is the error a refused command gets.
func refusal(c *commands.Command, why string) string {
	return "ERR command '" + strings.ToUpper(c.Name) + "' is not supported by the proxy: " + why
}
