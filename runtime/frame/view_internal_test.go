package frame

import (
	"bytes"
	"fmt"
	"testing"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame/resp"
)

// respView is a RESP server's OnView over a resp.Parser, as examples/kv
// reads its input: it counts the commands and their arguments, and checks
// that each call's input begins with what the last one left.
type respView struct {
	p          resp.Parser
	args       [][]byte
	commands   int
	lastArgc   int
	calls      int
	left       int    // bytes the last call left
	head, tail []byte // the first and last bytes it left
}

func (v *respView) OnView(_ *percore.Conn, in []byte) (int, error) {
	v.calls++
	if len(in) < v.left || !bytes.HasPrefix(in, v.head) || !bytes.Equal(in[v.left-len(v.tail):v.left], v.tail) {
		return 0, fmt.Errorf("call %d: shown %d bytes, not the %d the last call left followed by more", v.calls, len(in), v.left)
	}
	done := 0
	for {
		args, n, err := v.p.Parse(v.args[:0], in[done:], resp.Limits{})
		if err != nil {
			return 0, err
		}
		if n == 0 {
			break
		}
		v.args = args
		v.commands++
		v.lastArgc = len(args)
		done += n
	}
	rest := in[done:]
	v.left = len(rest)
	k := min(len(rest), 16)
	v.head = append(v.head[:0], rest[:k]...)
	v.tail = append(v.tail[:0], rest[len(rest)-k:]...)
	return done, nil
}

// TestViewTrickleIsLinear is issue 23's trickle through View: a 980 KB
// command of 140,000 one-byte arguments arriving in 7-byte and 64-byte
// reads (and in reads of 3,000 bytes, which View shows with a growing
// probe). Each call is shown what the last one left followed by the new
// bytes, and the work stays linear in the command's size: View copies each
// byte into its buffer a bounded number of times, and the parser, keeping
// its progress, examines each about twice.
func TestViewTrickleIsLinear(t *testing.T) {
	cmd := fmt.Appendf(nil, "*%d\r\n", 140000)
	for range 140000 {
		cmd = append(cmd, "$1\r\nx\r\n"...)
	}
	cmd = append(cmd, "*1\r\n$4\r\nPING\r\n"...)
	for _, piece := range []int{7, 64, 3000} {
		t.Run(fmt.Sprintf("%d-byte reads", piece), func(t *testing.T) {
			v := &respView{}
			h := View(v, SplitConfig{MaxBuffered: 1 << 20})
			var c percore.Conn
			h.(percore.OpenHandler).OnOpen(&c)
			// copied sums what every session the connection had copied
			// (View gives its session back whenever nothing is held).
			var s *session
			var copied, before int64
			n := int64(len(cmd))
			for i := 0; i < len(cmd); i += piece {
				h.OnData(&c, cmd[i:min(i+piece, len(cmd))])
				if c.Closed() {
					t.Fatalf("closed after %d bytes", i)
				}
				now, _ := c.AdapterValue().(*session)
				if now != s || now != nil && now.t.copied < copied-before {
					before = copied
				}
				if s = now; s != nil {
					copied = before + s.t.copied
				}
				if copied > 5*n || v.p.Scanned() > 3*n+22*int64(v.calls) {
					t.Fatalf("after %d of %d bytes: %d bytes copied, %d examined by the parser in %d calls: not linear",
						i, n, copied, v.p.Scanned(), v.calls)
				}
			}
			if v.commands != 2 || v.lastArgc != 1 || c.AdapterValue() != nil {
				t.Fatalf("%d commands (the last of %d arguments), session left: %v", v.commands, v.lastArgc, c.AdapterValue())
			}
			t.Logf("%d bytes in %d calls: %d copied, %d examined", n, v.calls, copied, v.p.Scanned())
		})
	}
}
