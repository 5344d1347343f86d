// Package resp is the Redis serialization protocol for percore servers
// and proxies: a split function for client commands, a parser of their
// arguments, appenders for replies, and a split function for replies of
// RESP2 and RESP3 (what a server sends after HELLO 3).
//
// A command is an array of bulk strings ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n")
// or an inline command (a line of words, "GET k\r\n"). ScanCommand is a
// bufio.SplitFunc that returns each complete command, raw, as its token,
// for frame.Split (or a bufio.Scanner); Args then reads the arguments of a
// token without a copy:
//
//	var args [][]byte // one per connection or per loop, reused
//	h := frame.Split(resp.ScanCommand(resp.Limits{}), frame.HandlerFunc(
//		func(c *percore.Conn, cmd []byte) {
//			args = resp.Args(args[:0], cmd)
//			...
//		}), frame.SplitConfig{MaxBuffered: 1 << 20})
//
// Parse reads one command in place instead, for a frame.View handler
// (docs/decisions/0018-input-buffering.md compares the two), and a Parser
// does the same while keeping its progress through a partial command
// between reads, so that a command that arrives in many pieces is read
// once rather than again from its start at every piece: a server's
// connection holds one (docs/decisions/0029-parsers-keep-their-progress.md).
// ScanReply is
// the split function for a server's replies, of every RESP2 and RESP3 type,
// nested up to a limit: a proxy reads one reply from a pooled connection with it
// and upstream.Exchange.
//
// # Limits and errors
//
// Limits bound a command's arguments, each argument's length and an inline
// command's length; ReplyLimits bound a reply's bulk strings, arrays, lines
// and nesting. A command over them, or malformed, is a
// *ProtocolError whose text is Redis's ("Protocol error: invalid bulk
// length"): a server answers "-ERR " and that text, and closes the
// connection, as Redis does. A command is an array of bulk strings only: an
// array nested in a command is the protocol error Redis gives
// ("expected '$', got '*'"). Empty commands ("*0\r\n", "*-1\r\n", a blank
// inline line) are skipped.
//
// Inline commands are split on spaces and tabs; unlike Redis, quotes are
// not interpreted (a client that quotes sends arrays).
//
// The package holds no state: its functions are safe for concurrent use.
// A Parser belongs to one connection.
package resp
