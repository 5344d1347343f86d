package frame

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	percore "github.com/percore/percore/runtime"
)

// orderView takes whole lines, at random only some of those complete in
// its input, and checks each against the next line its connection sent.
type orderView struct {
	rng  *rand.Rand
	want map[*percore.Conn][][]byte // each connection's lines still to come
	got  int
	err  error
	// greedy takes every complete line (the end, when no more reads come).
	greedy bool
}

func (v *orderView) OnView(c *percore.Conn, in []byte) (int, error) {
	done := 0
	for {
		i := bytes.IndexByte(in[done:], '\n')
		if i < 0 || !v.greedy && v.rng.IntN(4) == 0 { // sometimes leave complete lines for the next call
			return done, nil
		}
		line := in[done : done+i]
		w := v.want[c]
		if len(w) == 0 || !bytes.Equal(w[0], line) {
			next := "nothing"
			if len(w) > 0 {
				next = fmt.Sprintf("%q", w[0])
			}
			v.err = fmt.Errorf("got %q, want %s", line, next)
			return 0, v.err
		}
		v.want[c] = w[1:]
		v.got++
		done += i + 1
	}
}

// TestViewSessionsReleasedInOrder is a seeded model of View's sessions
// given back and taken again: eight connections on one adapter, each
// sending numbered lines of random lengths cut into random reads, the
// reads of all of them interleaved at random, and a handler that takes
// only some of the complete lines each time. Every line arrives once, in
// order, on its own connection (sessions move between connections through
// the free list), and a connection whose input is all consumed holds no
// session.
func TestViewSessionsReleasedInOrder(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 27))
		v := &orderView{rng: rng, want: map[*percore.Conn][][]byte{}}
		h := View(v, SplitConfig{MaxBuffered: 1 << 16})
		conns := make([]*percore.Conn, 8)
		streams := make([][]byte, len(conns))
		total := 0
		for i := range conns {
			c := new(percore.Conn)
			conns[i] = c
			h.(percore.OpenHandler).OnOpen(c)
			for j := range 20 + rng.IntN(40) {
				line := fmt.Appendf(nil, "c%d-%d-", i, j)
				for range rng.IntN(300) {
					line = append(line, byte('a'+rng.IntN(26)))
				}
				v.want[c] = append(v.want[c], line)
				streams[i] = append(append(streams[i], line...), '\n')
				total++
			}
		}
		for live := len(conns); live > 0; {
			i := rng.IntN(len(conns))
			if len(streams[i]) == 0 {
				continue
			}
			n := min(len(streams[i]), 1+rng.IntN(200))
			read := append([]byte(nil), streams[i][:n]...) // a read's bytes are the runtime's: not kept
			streams[i] = streams[i][n:]
			h.OnData(conns[i], read)
			clear(read)
			if v.err != nil {
				t.Fatalf("seed %d, connection %d: %v", seed, i, v.err)
			}
			if len(streams[i]) == 0 {
				live--
			}
		}
		// The handler left some complete lines behind: what is left of
		// each connection must be in its session, and is taken by one
		// more call (a read of nothing, which only a test makes).
		v.greedy = true
		for i, c := range conns {
			if s, _ := c.AdapterValue().(*session); s == nil && len(v.want[c]) > 0 {
				t.Fatalf("seed %d, connection %d: %d lines not delivered and no session holds them", seed, i, len(v.want[c]))
			}
			h.OnData(c, []byte{})
			if v.err != nil || len(v.want[c]) > 0 {
				t.Fatalf("seed %d, connection %d: %v, %d lines not delivered", seed, i, v.err, len(v.want[c]))
			}
			if c.AdapterValue() != nil {
				t.Fatalf("seed %d, connection %d: all consumed, yet it holds a session", seed, i)
			}
		}
		if v.got != total {
			t.Fatalf("seed %d: %d lines delivered, %d sent", seed, v.got, total)
		}
	}
}
