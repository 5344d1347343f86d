// Package commands is Redis's command table, as redis-server reports it
// with COMMAND INFO and COMMAND DOCS: every command and subcommand with its
// arity, flags, ACL categories, tips, key specs and documentation group. A
// server or proxy speaking RESP looks a command up here instead of keeping
// its own list: the arity check, whether a command writes, blocks or
// subscribes, and which arguments are keys all come from the table Redis
// itself serves.
//
//	cmd := commands.Find(args) // args[0] is the name; a container's subcommand is args[1]
//	switch {
//	case cmd == nil:
//		// unknown command (or unknown subcommand of a container)
//	case !cmd.ArityOK(len(args)):
//		// "ERR wrong number of arguments for '" + cmd.Name + "' command"
//	}
//	keys, ok := cmd.Keys(positions[:0], args) // the key arguments' indexes
//
// # Where the table comes from
//
// table.go is generated from a live redis-server by this package's test:
//
//	go test ./runtime/frame/resp/commands -run TestTableMatchesRedis -update
//
// starts redis-server (as the project's other real-peer tests do), reads
// COMMAND INFO and COMMAND DOCS, and writes the table. Without -update the
// same test compares the committed table with the running server's, field
// by field, and fails on any difference, so the table cannot drift from
// the Redis it claims to describe; a second test checks Keys against the
// server's own COMMAND GETKEYS. Both skip, saying so, where redis-server is
// not installed. The table describes redis-server 7.0 (Version).
//
// What is not kept: COMMAND DOCS' history and argument trees (a command's
// options are its implementation's business), and module commands.
//
// The table is read-only and the package holds no mutable state: every
// function is safe for concurrent use.
package commands
