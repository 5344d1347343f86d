//go:build linux

package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	"github.com/percore/percore/runtime/frame/resp"
	"github.com/percore/percore/runtime/frame/resp/commands"
)

// readValue reads one RESP2 reply as a Go value: string (simple and bulk),
// int64, []any, nil, or an error for an error reply.
func readValue(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 {
		return nil, fmt.Errorf("short line %q", line)
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return fmt.Errorf("%s", body), nil
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, _ := strconv.Atoi(body)
		if n < 0 {
			return nil, nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		return string(b[:n]), nil
	case '*':
		n, _ := strconv.Atoi(body)
		if n < 0 {
			return nil, nil
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = readValue(r); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown reply %q", line)
}

// pairsOf reads a RESP2 map (a flat array of name, value).
func pairsOf(v any) map[string]any {
	m := map[string]any{}
	a, _ := v.([]any)
	for i := 0; i+1 < len(a); i += 2 {
		if k, ok := a[i].(string); ok {
			m[k] = a[i+1]
		}
	}
	return m
}

// sampleArgs makes a short argument list that COMMAND DOCS' argument tree
// allows: every argument that is not optional, twice where it may repeat
// (so that a command answering once per argument, SUBSCRIBE's kind,
// answers twice), the first choice of each oneof, a key for a key and a
// small valid value for the rest.
func sampleArgs(args []any, keyN *int) []string {
	var out []string
	for _, a := range args {
		m := pairsOf(a)
		flags, _ := m["flags"].([]any)
		optional, multiple := false, false
		for _, f := range flags {
			switch f {
			case "optional":
				optional = true
			case "multiple":
				multiple = true
			}
		}
		if optional {
			continue
		}
		if multiple {
			single := append([]any(nil), a.([]any)...)
			for i := 0; i+1 < len(single); i += 2 {
				if single[i] == "flags" {
					single[i+1] = []any{}
				}
			}
			out = append(out, sampleArgs([]any{single, single}, keyN)...)
			continue
		}
		tok, _ := m["token"].(string)
		typ, _ := m["type"].(string)
		if tok != "" {
			out = append(out, tok)
		}
		switch typ {
		case "pure-token":
		case "key":
			*keyN++
			out = append(out, "reply:k"+strconv.Itoa(*keyN))
		case "integer", "unix-time":
			out = append(out, "1")
		case "double":
			out = append(out, "1.5")
		case "pattern":
			out = append(out, "*")
		case "oneof":
			sub, _ := m["arguments"].([]any)
			if len(sub) > 0 {
				out = append(out, sampleArgs(sub[:1], keyN)...)
			}
		case "block":
			sub, _ := m["arguments"].([]any)
			out = append(out, sampleArgs(sub, keyN)...)
		default:
			out = append(out, "v")
		}
	}
	return out
}

// TestForwardedCommandsAnswerOnce checks the proxy's rules against
// redis-server itself: every command of the table that the proxy forwards
// is run against a real redis-server, with the arguments COMMAND DOCS
// says it needs, followed by PING, and must answer exactly one reply before
// the PONG (a command with no reply, or one per channel, would shift the
// shared connection's replies). And the commands refused for their
// replies do not answer once: SUBSCRIBE-like commands with two channels
// answer twice, REPLCONF ACK not at all.
func TestForwardedCommandsAnswerOnce(t *testing.T) {
	r := pctest.StartRedis(t)
	c := dialResp(t, r.Addr())
	c.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.c.Write(resp.AppendCommand(nil, "COMMAND", "DOCS")); err != nil {
		t.Fatal(err)
	}
	v, err := readValue(c.r)
	if err != nil {
		t.Fatal(err)
	}
	docs := pairsOf(v)
	if len(docs) < 200 {
		t.Fatalf("COMMAND DOCS listed %d commands", len(docs))
	}
	type sample struct {
		name string
		args []string
	}
	var forwarded, refused []sample
	keyN := 0
	var visit func(name string, prefix []string, d map[string]any)
	visit = func(name string, prefix []string, d map[string]any) {
		cmd := commands.LookupString(name)
		if cmd == nil {
			t.Errorf("COMMAND DOCS has %q, the table does not", name)
			return
		}
		if subs := pairsOf(d["subcommands"]); len(subs) > 0 {
			for sub, sd := range subs {
				_, subName, _ := strings.Cut(sub, "|")
				visit(sub, append(append([]string(nil), prefix...), subName), pairsOf(sd))
			}
			return
		}
		args, _ := d["arguments"].([]any)
		s := sample{name: name, args: append(append([]string(nil), prefix...), sampleArgs(args, &keyN)...)}
		switch rules()[cmd].refuse {
		case "":
			forwarded = append(forwarded, s)
		case whySubscribes:
			refused = append(refused, s)
		}
	}
	for name, d := range docs {
		visit(name, []string{name}, pairsOf(d))
	}
	if len(forwarded) < 150 {
		t.Fatalf("only %d commands forwarded", len(forwarded))
	}
	// replies runs cmd then PING on a new connection and counts the
	// replies before the PONG.
	replies := func(cmd []string) (int, []any) {
		rc := dialResp(t, r.Addr())
		defer rc.c.Close()
		rc.c.SetDeadline(time.Now().Add(10 * time.Second))
		req := resp.AppendCommand(nil, cmd...)
		req = resp.AppendCommand(req, "PING", "end-of-replies")
		if _, err := rc.c.Write(req); err != nil {
			t.Fatal(err)
		}
		var got []any
		for {
			v, err := readValue(rc.r)
			if err != nil {
				t.Fatalf("%q: %v after %d replies", cmd, err, len(got))
			}
			// PING's reply: a bulk string, or in subscribed mode an
			// array ["pong", "end-of-replies"].
			if v == "end-of-replies" {
				return len(got), got
			}
			if a, ok := v.([]any); ok && len(a) == 2 && a[0] == "pong" {
				return len(got), got
			}
			got = append(got, v)
		}
	}
	ok := 0
	for _, s := range forwarded {
		n, got := replies(s.args)
		if n != 1 {
			t.Errorf("%s is forwarded, but %q answered %d replies: %v", s.name, s.args, n, got)
			continue
		}
		if _, isErr := got[0].(error); !isErr {
			ok++
		}
	}
	t.Logf("%d forwarded commands answered once each (%d without an error)", len(forwarded), ok)
	if ok < len(forwarded)/2 {
		t.Errorf("only %d of %d samples ran without an error: the argument samples are too poor to judge", ok, len(forwarded))
	}
	if len(refused) < 6 {
		t.Errorf("%d commands refused for subscribing: %v", len(refused), refused)
	}
	for _, s := range refused {
		args := s.args
		if len(args) == 1 {
			args = []string{args[0], "ch1", "ch2"} // UNSUBSCRIBE's channels are optional
		}
		if n, got := replies(args); n == 1 {
			t.Errorf("%s is refused for its replies, but %q answered once: %v", s.name, args, got)
		}
	}
	if n, _ := replies([]string{"REPLCONF", "ACK", "0"}); n != 0 {
		t.Errorf("REPLCONF ACK answered %d replies; the rule says none", n)
	}
	if cmd := commands.LookupString("replconf"); rules()[cmd].refuse == "" {
		t.Error("REPLCONF is forwarded")
	}
}
