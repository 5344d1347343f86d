//go:build linux

package resp

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/percore/percore/runtime/frame"
)

// pipeline is a multi-command input: arrays (one with CRLF inside a bulk
// string, one with an empty argument), inline commands and skipped empty
// ones.
var pipeline = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n" +
	"GET k\r\n" +
	"*0\r\n" +
	"*2\r\n$4\r\nECHO\r\n$0\r\n\r\n" +
	"\r\n" +
	"PING\n" +
	"*2\r\n$6\r\nEXISTS\r\n$11\r\nhello world\r\n"

var pipelineArgs = [][]string{{"SET", "k", "a\r\nb"}, {"GET", "k"}, {"ECHO", ""}, {"PING"}, {"EXISTS", "hello world"}}

// splitAll feeds chunks to a Splitter over ScanCommand and returns every
// command's arguments and the first error.
func splitAll(lim Limits, max int, chunks ...[]byte) ([][]string, error) {
	s := frame.Splitter{Split: ScanCommand(lim), MaxBuffered: max}
	var cmds [][]string
	var args [][]byte
	emit := func(tok []byte) bool {
		args = Args(args[:0], tok)
		cmds = append(cmds, strs(args))
		return true
	}
	for _, c := range chunks {
		if _, err := s.Feed(c, emit); err != nil {
			return cmds, err
		}
	}
	return cmds, s.End(emit)
}

// TestSplitEveryBoundary cuts the pipeline at every byte, and feeds it
// byte by byte: the commands are the same.
func TestSplitEveryBoundary(t *testing.T) {
	in := []byte(pipeline)
	for i := range len(in) + 1 {
		got, err := splitAll(Limits{}, 0, in[:i], in[i:])
		if err != nil || !equalCmds(got, pipelineArgs) {
			t.Fatalf("cut at %d: %q, %v", i, got, err)
		}
	}
	var bytewise [][]byte
	for i := range in {
		bytewise = append(bytewise, in[i:i+1])
	}
	if got, err := splitAll(Limits{}, 0, bytewise...); err != nil || !equalCmds(got, pipelineArgs) {
		t.Fatalf("byte by byte: %q, %v", got, err)
	}
}

// TestCommandTooLong: a command over the buffer limit in pieces is a
// *frame.TooLongError; a bulk over Limits.MaxBulk is Redis's error at once,
// from its header.
func TestCommandTooLong(t *testing.T) {
	big := AppendCommand(nil, "SET", "k", strings.Repeat("v", 2000))
	_, err := splitAll(Limits{}, 1024, big[:500], big[500:1500], big[1500:])
	if !errors.Is(err, frame.ErrTooLong) {
		t.Fatalf("a 2 KB command with a 1 KiB buffer: %v, want frame.ErrTooLong", err)
	}
	got, err := splitAll(Limits{MaxBulk: 1000}, 1<<20, AppendCommand(nil, "PING"), big[:40])
	var pe *ProtocolError
	if !errors.As(err, &pe) || pe.Reason != "invalid bulk length" || !equalCmds(got, [][]string{{"PING"}}) {
		t.Fatalf("a bulk over MaxBulk: %q, %v", got, err)
	}
}

func equalCmds(a, b [][]string) bool {
	return slices.EqualFunc(a, b, func(x, y []string) bool { return slices.Equal(x, y) })
}

// refCommands is the command grammar written the obvious way, over the
// whole stream: the commands, and whether the stream is malformed (or over
// lim) at some point rather than merely unfinished.
func refCommands(stream []byte, lim Limits) (cmds [][]string, failed bool) {
	lim = lim.withDefaults()
	for len(stream) > 0 {
		if stream[0] != '*' {
			i := bytes.IndexByte(stream, '\n')
			if i < 0 {
				return cmds, len(stream) > lim.MaxInline
			}
			if i > lim.MaxInline {
				return cmds, true
			}
			f := strings.FieldsFunc(strings.TrimSuffix(string(stream[:i]), "\r"),
				func(r rune) bool { return r == ' ' || r == '\t' })
			if len(f) > lim.MaxArgs {
				return cmds, true
			}
			if len(f) > 0 {
				cmds = append(cmds, f)
			}
			stream = stream[i+1:]
			continue
		}
		count, i, st := refHeader(stream)
		if st != complete {
			return cmds, st == malformed
		}
		if count > int64(lim.MaxArgs) {
			return cmds, true
		}
		var cmd []string
		for range max(count, 0) {
			if i == len(stream) {
				return cmds, false
			}
			if stream[i] != '$' {
				return cmds, true
			}
			size, j, st := refHeader(stream[i:])
			if st != complete {
				return cmds, st == malformed
			}
			if size < 0 || size > int64(lim.MaxBulk) {
				return cmds, true
			}
			i += j
			if len(stream)-i < int(size)+2 {
				return cmds, false
			}
			if string(stream[i+int(size):i+int(size)+2]) != "\r\n" {
				return cmds, true
			}
			cmd = append(cmd, string(stream[i:i+int(size)]))
			i += int(size) + 2
		}
		if len(cmd) > 0 {
			cmds = append(cmds, cmd)
		}
		stream = stream[i:]
	}
	return cmds, false
}

// chunk cuts stream into pieces whose lengths come from cuts (each byte a
// length from 1 to 256, cycled).
func chunk(stream, cuts []byte) [][]byte {
	var out [][]byte
	for i := 0; len(stream) > 0; i++ {
		n := len(stream)
		if len(cuts) > 0 {
			n = min(int(cuts[i%len(cuts)])+1, len(stream))
		}
		out = append(out, stream[:n])
		stream = stream[n:]
	}
	return out
}

// FuzzCommands checks the parser against refCommands, on the whole
// stream (Parse, command after command) and in the chunks cuts describe
// (ScanCommand through a frame.Splitter, then Args; and a Parser, shown
// the input as frame.View shows it).
func FuzzCommands(f *testing.F) {
	f.Add([]byte(pipeline), []byte{3, 0, 17}, uint8(4), uint8(8), uint8(16))
	f.Add([]byte("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n*1\r\n"), []byte{1}, uint8(0), uint8(0), uint8(0))
	f.Add([]byte("*1\r\n$-1\r\n"), []byte{0}, uint8(0), uint8(0), uint8(0))
	f.Add([]byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\n0123456789\r\n"), []byte{5, 2}, uint8(3), uint8(9), uint8(0))
	f.Add([]byte("GET a b c\r\nSET  x\ty\n\n"), []byte{2}, uint8(2), uint8(0), uint8(6))
	f.Add([]byte("*12345678901234567890\r\n"), []byte{7}, uint8(0), uint8(0), uint8(0))
	f.Add([]byte("*1\r$1\r\na\r\n"), []byte{0, 1}, uint8(0), uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, stream, cuts []byte, maxArgs, maxBulk, maxInline uint8) {
		lim := Limits{MaxArgs: int(maxArgs), MaxBulk: int(maxBulk), MaxInline: int(maxInline)}
		want, wantFail := refCommands(stream, lim)

		var whole [][]string
		var wholeErr error
		for p := stream; ; {
			args, n, err := Parse(nil, p, lim)
			if err != nil {
				wholeErr = err
				break
			}
			if n == 0 {
				break
			}
			if len(args) > 0 {
				whole = append(whole, strs(args))
			}
			p = p[n:]
		}
		if !equalCmds(whole, want) || (wholeErr != nil) != wantFail {
			t.Fatalf("Parse: %q, %v; the reference: %q, failed %v", whole, wholeErr, want, wantFail)
		}
		if wholeErr != nil && !errors.Is(wholeErr, ErrProtocol) {
			t.Fatalf("Parse error %v is not a ProtocolError", wholeErr)
		}

		split, err := splitAll(lim, 1<<20, chunk(stream, cuts)...)
		if !equalCmds(split, want) || (err != nil) != wantFail {
			t.Fatalf("split in %d chunks: %q, %v; the reference: %q, failed %v",
				len(chunk(stream, cuts)), split, err, want, wantFail)
		}

		var p Parser
		view, err := viewAll(&p, lim, chunk(stream, cuts)...)
		if !equalCmds(view, want) || (err != nil) != wantFail {
			t.Fatalf("a Parser in %d chunks: %q, %v; the reference: %q, failed %v",
				len(chunk(stream, cuts)), view, err, want, wantFail)
		}
	})
}
