package resp

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// viewAll feeds chunks to a Parser the way frame.View shows a connection's
// input: what the parser did not take is kept and shown again, followed by
// the next chunk, from a fresh copy each time (the held bytes move, as a
// View's buffer may). It returns every command and the first error, and
// the most bytes held at once.
func viewAll(p *Parser, lim Limits, chunks ...[]byte) (cmds [][]string, err error) {
	var held []byte
	for _, c := range chunks {
		held = append(append([]byte(nil), held...), c...)
		for {
			args, n, err := p.Parse(nil, held, lim)
			if err != nil {
				return cmds, err
			}
			if n == 0 {
				break
			}
			if len(args) > 0 {
				cmds = append(cmds, strs(args))
			}
			held = held[n:]
		}
	}
	return cmds, nil
}

// TestParserEveryBoundary cuts the pipeline at every byte, and feeds it
// byte by byte: the Parser gives the same commands as Parse over the whole.
func TestParserEveryBoundary(t *testing.T) {
	in := []byte(pipeline)
	for i := range len(in) + 1 {
		var p Parser
		got, err := viewAll(&p, Limits{}, in[:i], in[i:])
		if err != nil || !equalCmds(got, pipelineArgs) || p.Partial() {
			t.Fatalf("cut at %d: %q, %v (partial %v)", i, got, err, p.Partial())
		}
	}
	var p Parser
	var bytewise [][]byte
	for i := range in {
		bytewise = append(bytewise, in[i:i+1])
	}
	if got, err := viewAll(&p, Limits{}, bytewise...); err != nil || !equalCmds(got, pipelineArgs) {
		t.Fatalf("byte by byte: %q, %v", got, err)
	}
}

// TestParserErrors: a malformed command in pieces is the error Parse gives
// for it whole, and the Parser starts again after Reset.
func TestParserErrors(t *testing.T) {
	tests := []struct {
		name, in string
		lim      Limits
	}{
		{"not a bulk", "*2\r\n$3\r\nGET\r\n*1\r\n", Limits{}},
		{"bulk length", "*1\r\n$x\r\n", Limits{}},
		{"bulk over the limit", "*1\r\n$100\r\n", Limits{MaxBulk: 10}},
		{"bulk end", "*1\r\n$3\r\nabcde\r\n", Limits{}},
		{"too many args", "*5\r\n", Limits{MaxArgs: 4}},
		{"inline too long", strings.Repeat("x", 70), Limits{MaxInline: 64}},
		{"inline too many words", "a b c d e\r\n", Limits{MaxArgs: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, whole := Parse(nil, []byte(tt.in), tt.lim)
			if whole == nil {
				t.Fatalf("Parse accepts %q", tt.in)
			}
			var p Parser
			var pieces [][]byte
			for i := 0; i < len(tt.in); i += 3 {
				pieces = append(pieces, []byte(tt.in[i:min(i+3, len(tt.in))]))
			}
			_, err := viewAll(&p, tt.lim, pieces...)
			if err == nil || err.Error() != whole.Error() {
				t.Fatalf("in pieces: %v; whole: %v", err, whole)
			}
			if p.Partial() {
				t.Fatal("progress kept after an error")
			}
			if got, err := viewAll(&p, Limits{}, []byte("PING\r\n")); err != nil || !equalCmds(got, [][]string{{"PING"}}) {
				t.Fatalf("after the error: %q, %v", got, err)
			}
		})
	}
}

// TestParserStartsAgainOnOtherInput: shown less than the progress it made,
// the Parser starts again rather than read past the input.
func TestParserStartsAgainOnOtherInput(t *testing.T) {
	var p Parser
	cmd := AppendCommand(nil, "SET", "key", "value")
	if _, n, _ := p.Parse(nil, cmd[:20], Limits{}); n != 0 || !p.Partial() {
		t.Fatalf("a partial command: n %d, partial %v", n, p.Partial())
	}
	args, n, err := p.Parse(nil, []byte("PING\r\n"), Limits{})
	if err != nil || n != 6 || !equalCmds([][]string{strs(args)}, [][]string{{"PING"}}) {
		t.Fatalf("other input: %q, %d, %v", args, n, err)
	}
}

// trickle is issue 23's input: one command of count one-byte arguments
// (the name included).
func trickle(count int) []byte {
	b := fmt.Appendf(nil, "*%d\r\n", count)
	for range count {
		b = append(b, "$1\r\nx\r\n"...)
	}
	return b
}

// TestParserWorkIsLinear counts the bytes the parser examines for issue
// 23's trickled command (980 KB: 140,000 one-byte arguments) cut in 7- and
// 64-byte pieces, for a value of 256 KiB cut in 1-byte pieces at its
// start, and for inline commands cut byte by byte: each is read about
// once (the scan, then one pass to take the arguments), not again from its
// start at every piece. Parsed from the start at every piece, the first
// costs 70 GB of scanning.
func TestParserWorkIsLinear(t *testing.T) {
	value := AppendCommand(nil, "SET", "k", strings.Repeat("v", 256<<10))
	inline := []byte(strings.Repeat("word ", 12000) + "\r\n")
	tests := []struct {
		name  string
		in    []byte
		piece int
		args  int
	}{
		{"980 KB of 1-byte args in 7-byte pieces", trickle(140000), 7, 140000},
		{"980 KB of 1-byte args in 64-byte pieces", trickle(140000), 64, 140000},
		{"a 256 KiB value byte by byte", value, 1, 3},
		{"a 60 KB inline command byte by byte", inline, 1, 12000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Parser
			// Each byte once by the scan and once by the pass that takes
			// the arguments, plus a partial header read again per call.
			// Held by reference, not copied (viewAll's copies would
			// make the test itself quadratic): the bytes do not move.
			got, calls := 0, 0
			limit := func() int64 { return 2*int64(len(tt.in)) + 22*int64(calls) }
			for end := 0; end < len(tt.in); {
				end = min(end+tt.piece, len(tt.in))
				args, n, err := p.Parse(nil, tt.in[:end], Limits{})
				calls++
				if err != nil {
					t.Fatal(err)
				}
				if p.Scanned() > limit() {
					t.Fatalf("%d bytes examined after %d of %d bytes in %d calls: the parse is not linear",
						p.Scanned(), end, len(tt.in), calls)
				}
				if n > 0 {
					if n != len(tt.in) {
						t.Fatalf("took %d of %d bytes", n, len(tt.in))
					}
					got = len(args)
				}
			}
			if got != tt.args {
				t.Fatalf("%d arguments, want %d", got, tt.args)
			}
			t.Logf("%d bytes examined for %d bytes in %d calls", p.Scanned(), len(tt.in), calls)
		})
	}
}

// TestParserRandomPieces: random commands (arrays with values of every
// length, inline commands, empty ones) in random pieces give, through a
// Parser, exactly the commands of the reference over the whole stream. The
// seed is printed on failure.
func TestParserRandomPieces(t *testing.T) {
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 1))
	for round := range 200 {
		var stream []byte
		for range 1 + rng.IntN(12) {
			switch rng.IntN(5) {
			case 0:
				stream = append(stream, "PING a\tb\r\n"...)
			case 1:
				stream = append(stream, "*0\r\n"...)
			default:
				var args []string
				for range 1 + rng.IntN(6) {
					args = append(args, strings.Repeat("v\r\n", rng.IntN(300)))
				}
				stream = AppendCommand(stream, args...)
			}
		}
		var pieces [][]byte
		for rest := stream; len(rest) > 0; {
			n := min(len(rest), 1+rng.IntN(40))
			pieces = append(pieces, rest[:n])
			rest = rest[n:]
		}
		want, _ := refCommands(stream, Limits{})
		var p Parser
		got, err := viewAll(&p, Limits{}, pieces...)
		if err != nil || !equalCmds(got, want) || p.Partial() {
			t.Fatalf("seed %d round %d: %d commands, %v; want %d (partial %v)", seed, round, len(got), err, len(want), p.Partial())
		}
	}
}

func TestParserAllocatesNothing(t *testing.T) {
	var p Parser
	cmd := AppendCommand(nil, "SET", "key", "value")
	dst := make([][]byte, 0, 4)
	allocs := testing.AllocsPerRun(100, func() {
		if _, n, _ := p.Parse(dst[:0], cmd[:17], Limits{}); n != 0 {
			t.Fatal("partial command taken")
		}
		if args, n, _ := p.Parse(dst[:0], cmd, Limits{}); n != len(cmd) || !bytes.Equal(args[2], []byte("value")) {
			t.Fatal("command not taken")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations", allocs)
	}
	if !errors.Is(&ProtocolError{}, ErrProtocol) {
		t.Fatal("ProtocolError does not match ErrProtocol")
	}
}
