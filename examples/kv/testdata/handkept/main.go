//go:build linux

// Command handkept is examples/kv written the way the trial wrote it,
// before percore had input buffering, per-loop state and cross-loop calls:
// a hand-kept tail of unparsed bytes per connection, a RESP parser of its
// own, one loop (with two, a GET finds nil when the SET landed on the
// other loop's map: there is no way to reach the loop that owns a key), and
// replies built in a scratch buffer that Write copies again. It is kept
// under testdata, out of the build, for the line count in
// docs/performance.md; it compiles with
//
//	go build -o /dev/null ./examples/kv/testdata/handkept
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	percore "github.com/percore/percore/runtime"
)

const (
	maxRequest = 1 << 20
	maxInline  = 64 << 10
	maxArgs    = 1 << 20
)

var errIncomplete = errors.New("incomplete")

// server is the handler; keys is the one loop's map.
type server struct {
	keys map[string][]byte
}

// conn is one connection: the bytes of a command not complete yet.
type conn struct {
	tail    []byte
	args    [][]byte
	scratch []byte
}

func (s *server) OnOpen(c *percore.Conn) { c.SetValue(&conn{}) }

func (s *server) OnData(c *percore.Conn, data []byte) {
	cn := c.Value().(*conn)
	in := data
	if len(cn.tail) > 0 {
		cn.tail = append(cn.tail, data...)
		in = cn.tail
	}
	done := 0
	for done < len(in) && !c.Closed() {
		n, err := cn.parse(in[done:])
		if errors.Is(err, errIncomplete) {
			break
		}
		if err != nil {
			c.Write([]byte("-ERR Protocol error: " + err.Error() + "\r\n"))
			c.Close()
			return
		}
		done += n
		if len(cn.args) > 0 {
			s.command(c, cn)
		}
	}
	rest := in[done:]
	if len(rest) > maxRequest {
		c.Write([]byte("-ERR Protocol error: request too long\r\n"))
		c.Close()
		return
	}
	if len(cn.tail) > 0 {
		cn.tail = cn.tail[:copy(cn.tail, rest)]
	} else {
		cn.tail = append(cn.tail, rest...)
	}
	if len(cn.tail) == 0 && cap(cn.tail) > 4096 {
		cn.tail = nil
	}
}

// parse reads one command at the start of p into cn.args.
func (cn *conn) parse(p []byte) (int, error) {
	cn.args = cn.args[:0]
	if p[0] != '*' {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if len(p) > maxInline {
				return 0, errors.New("too big inline request")
			}
			return 0, errIncomplete
		}
		cn.args = append(cn.args, bytes.Fields(bytes.TrimSuffix(p[:i], []byte("\r")))...)
		return i + 1, nil
	}
	count, i, err := number(p, 0)
	if err != nil {
		if errors.Is(err, errIncomplete) {
			return 0, err
		}
		return 0, errors.New("invalid multibulk length")
	}
	if count > maxArgs {
		return 0, errors.New("invalid multibulk length")
	}
	for range max(count, 0) {
		if i >= len(p) {
			return 0, errIncomplete
		}
		if p[i] != '$' {
			return 0, fmt.Errorf("expected '$', got '%c'", p[i])
		}
		size, j, err := number(p, i)
		if err != nil {
			if errors.Is(err, errIncomplete) {
				return 0, err
			}
			return 0, errors.New("invalid bulk length")
		}
		if size < 0 || size > maxRequest {
			return 0, errors.New("invalid bulk length")
		}
		if j+size+2 > len(p) {
			return 0, errIncomplete
		}
		cn.args = append(cn.args, p[j:j+size])
		i = j + size + 2
	}
	return i, nil
}

// number reads "<type><digits>\r\n" at p[i:].
func number(p []byte, i int) (int, int, error) {
	end := bytes.Index(p[i:], []byte("\r\n"))
	if end < 0 {
		if len(p)-i > 32 {
			return 0, 0, errors.New("too long")
		}
		return 0, 0, errIncomplete
	}
	n, err := strconv.Atoi(string(p[i+1 : i+end]))
	return n, i + end + 2, err
}

func (s *server) command(c *percore.Conn, cn *conn) {
	args := cn.args
	out := cn.scratch[:0]
	name := string(bytes.ToUpper(args[0]))
	switch {
	case name == "GET" && len(args) == 2:
		if v, ok := s.keys[string(args[1])]; ok {
			out = bulk(out, v)
		} else {
			out = append(out, "$-1\r\n"...)
		}
	case name == "SET" && len(args) == 3:
		s.keys[string(args[1])] = append([]byte(nil), args[2]...)
		out = append(out, "+OK\r\n"...)
	case name == "SET" && len(args) > 3:
		out = append(out, "-ERR syntax error\r\n"...)
	case name == "INCR" && len(args) == 2:
		n, err := strconv.ParseInt(string(s.keys[string(args[1])]), 10, 64)
		if _, ok := s.keys[string(args[1])]; !ok {
			n, err = 0, nil
		}
		switch {
		case err != nil:
			out = append(out, "-ERR value is not an integer or out of range\r\n"...)
		case n == 1<<63-1:
			out = append(out, "-ERR increment or decrement would overflow\r\n"...)
		default:
			s.keys[string(args[1])] = strconv.AppendInt(nil, n+1, 10)
			out = append(strconv.AppendInt(append(out, ':'), n+1, 10), "\r\n"...)
		}
	case (name == "DEL" || name == "EXISTS") && len(args) >= 2:
		n := 0
		for _, k := range args[1:] {
			if _, ok := s.keys[string(k)]; ok {
				n++
				if name == "DEL" {
					delete(s.keys, string(k))
				}
			}
		}
		out = append(strconv.AppendInt(append(out, ':'), int64(n), 10), "\r\n"...)
	case name == "PING" && len(args) == 1:
		out = append(out, "+PONG\r\n"...)
	case (name == "PING" || name == "ECHO") && len(args) == 2:
		out = bulk(out, args[1])
	case name == "COMMAND":
		out = append(out, "*0\r\n"...)
	case name == "HELLO" && (len(args) == 1 || string(args[1]) == "2"):
		out = append(out, "*14\r\n$6\r\nserver\r\n$8\r\nhandkept\r\n$7\r\nversion\r\n$5\r\n7.0.0\r\n"+
			"$5\r\nproto\r\n:2\r\n$2\r\nid\r\n:1\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n"+
			"$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n"...)
	case name == "HELLO":
		out = append(out, "-NOPROTO sorry, this protocol version is not supported\r\n"...)
	case name == "CLIENT" || name == "SELECT" && len(args) == 2 && string(args[1]) == "0":
		out = append(out, "+OK\r\n"...)
	case name == "CONFIG" && len(args) == 3 && string(args[2]) == "save":
		out = append(out, "*2\r\n$4\r\nsave\r\n$0\r\n\r\n"...)
	case name == "CONFIG" && len(args) == 3 && string(args[2]) == "appendonly":
		out = append(out, "*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n"...)
	case name == "CONFIG":
		out = append(out, "*0\r\n"...)
	case name == "QUIT":
		c.Write([]byte("+OK\r\n"))
		c.Close()
		return
	case name == "GET" || name == "SET" || name == "INCR" || name == "DEL" || name == "EXISTS" ||
		name == "PING" || name == "ECHO":
		out = append(out, "-ERR wrong number of arguments for '"+string(bytes.ToLower(args[0]))+"' command\r\n"...)
	default:
		msg := "-ERR unknown command '" + trunc(args[0], 128) + "', with args beginning with: "
		rest := ""
		for _, a := range args[1:] {
			if len(rest) >= 128 {
				break
			}
			rest += "'" + trunc(a, 128-len(rest)) + "' "
		}
		out = append(out, msg+rest+"\r\n"...)
	}
	c.Write(out)
	cn.scratch = out
}

func trunc(b []byte, n int) string {
	s := string(b[:min(len(b), n)])
	return string(bytes.ReplaceAll(bytes.ReplaceAll([]byte(s), []byte("\r"), []byte(" ")), []byte("\n"), []byte(" ")))
}

func bulk(out, v []byte) []byte {
	out = strconv.AppendInt(append(out, '$'), int64(len(v)), 10)
	out = append(append(append(out, "\r\n"...), v...), "\r\n"...)
	return out
}

func main() {
	addr := flag.String("addr", "127.0.0.1:6381", "listen address")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	// One loop: with more, a key's value would be in another loop's map.
	rt, err := percore.New(percore.Config{Addr: *addr, Cores: []int{0}, Logger: log},
		&server{keys: make(map[string][]byte)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "handkept:", err)
		os.Exit(1)
	}
	fmt.Printf("handkept: listening on %s\n", rt.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	rt.Close()
}
