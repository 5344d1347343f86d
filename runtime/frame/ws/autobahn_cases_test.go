package ws_test

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// The Autobahn testsuite's fuzzingclient cases (crossbario/autobahn-
// testsuite, autobahntestsuite/case/*.py), restated from their published
// definitions: what the fuzzer sends, how it cuts the bytes on the wire,
// what it expects back (Autobahn's expected[OK]: the strict outcome) and
// how the connection must close. Each case is named by its number.

// send is one frame the fuzzer sends, and how its bytes go on the wire:
// chop 0 sends it together with the frames around it (one write), sync
// (syncWrite) in a write of its own, chop N in writes of N bytes.
type send struct {
	f    wireFrame
	chop int
}

const syncWrite = -1

// step is what the fuzzer sends at one moment of a case. mark names the
// "timeout" event Autobahn records before a delayed step if the endpoint
// has not closed yet (section 6.4); raw, when set, replaces the frames by
// bytes already encoded (a frame whose payload arrives in several steps).
type step struct {
	sends []send
	mark  string
	raw   func() []byte
}

// abCase is one case.
type abCase struct {
	id    string
	steps []step
	// ok is the strict expected outcome (Autobahn's expected[Case.OK]).
	ok []event
	// closedByMe says the fuzzer starts the closing handshake: it sends a
	// Close 1000 after its frames unless ownClose says its frames already
	// hold its Close. Otherwise the endpoint must fail the connection.
	closedByMe bool
	ownClose   bool
	// codes are the close codes the endpoint may send (or none).
	codes []int
	// info marks Autobahn's informational cases: only a clean ending is
	// checked.
	info bool
	// offers are the permessage-deflate offers of the handshake
	// (sections 12 and 13), nil for none.
	offers []string
	// messages, for the compression and round-trip cases, are sent one at
	// a time, each after the echo of the previous one (compressed by the
	// fuzzer when the extension was agreed); fragment is their frame size.
	messages []event
	fragment int
	// gen, when set, makes messages when the case runs (sections 12 and
	// 13: made all at once at their published counts they would not fit
	// in memory).
	gen func() []event
}

func fr(op byte, fin bool, p string) wireFrame {
	return wireFrame{op: op, fin: fin, payload: []byte(p)}
}

func rsvFrame(op byte, rsv byte, p string) wireFrame {
	return wireFrame{op: op, fin: true, rsv: rsv, payload: []byte(p)}
}

func now(fs ...wireFrame) step {
	s := step{}
	for _, f := range fs {
		s.sends = append(s.sends, send{f: f})
	}
	return s
}

func chopped(chop int, fs ...wireFrame) step {
	s := step{}
	for _, f := range fs {
		s.sends = append(s.sends, send{f: f, chop: chop})
	}
	return s
}

func msg(p string) event    { return event{kind: "message", payload: p} }
func binMsg(p string) event { return event{kind: "message", payload: p, binary: true} }
func pong(p string) event   { return event{kind: "pong", payload: p} }

const (
	normal   = 1000
	protocol = 1002
	invalid  = 1007
)

// sendMessage is Autobahn's sendMessage: a message cut into frames of
// fragment bytes (0: one frame).
func sendMessage(op byte, p string, fragment int) []wireFrame {
	return message(op, []byte(p), fragment, nil)
}

func cases1to7() []abCase {
	var cs []abCase
	add := func(c abCase) { cs = append(cs, c) }
	// 1.1, 1.2: text and binary messages of the lengths around the length
	// encodings' limits; the last one sent in chops of 997 bytes.
	sizes := []int{0, 125, 126, 127, 128, 65535, 65536, 65536}
	for i, n := range sizes {
		chop := 0
		if i == 7 {
			chop = 997
		}
		t := strings.Repeat("*", n)
		add(abCase{id: fmt.Sprintf("1.1.%d", i+1), steps: []step{chopped(chop, fr(1, true, t))},
			ok: []event{msg(t)}, closedByMe: true, codes: []int{normal}})
		b := strings.Repeat("\xfe", n)
		add(abCase{id: fmt.Sprintf("1.2.%d", i+1), steps: []step{chopped(chop, fr(2, true, b))},
			ok: []event{binMsg(b)}, closedByMe: true, codes: []int{normal}})
	}
	// 2: pings and pongs.
	fe125 := strings.Repeat("\xfe", 125)
	add(abCase{id: "2.1", steps: []step{now(fr(9, true, ""))}, ok: []event{pong("")}, closedByMe: true, codes: []int{normal}})
	add(abCase{id: "2.2", steps: []step{now(fr(9, true, "Hello, world!"))}, ok: []event{pong("Hello, world!")}, closedByMe: true, codes: []int{normal}})
	add(abCase{id: "2.3", steps: []step{now(fr(9, true, "\x00\xff\xfe\xfd\xfc\xfb\x00\xff"))}, ok: []event{pong("\x00\xff\xfe\xfd\xfc\xfb\x00\xff")}, closedByMe: true, codes: []int{normal}})
	add(abCase{id: "2.4", steps: []step{now(fr(9, true, fe125))}, ok: []event{pong(fe125)}, closedByMe: true, codes: []int{normal}})
	add(abCase{id: "2.5", steps: []step{now(fr(9, true, fe125+"\xfe"))}, codes: []int{protocol}})
	add(abCase{id: "2.6", steps: []step{chopped(1, fr(9, true, fe125))}, ok: []event{pong(fe125)}, closedByMe: true, codes: []int{normal}})
	add(abCase{id: "2.7", steps: []step{now(fr(10, true, ""), closeFrame(normal, nil))}, closedByMe: true, ownClose: true, codes: []int{normal}})
	add(abCase{id: "2.8", steps: []step{now(fr(10, true, "unsolicited pong payload"), closeFrame(normal, nil))}, closedByMe: true, ownClose: true, codes: []int{normal}})
	add(abCase{id: "2.9", steps: []step{now(fr(10, true, "unsolicited pong payload"), fr(9, true, "ping payload"))}, ok: []event{pong("ping payload")}, closedByMe: true, codes: []int{normal}})
	for i, chop := range []int{0, 1} {
		s := step{}
		var ok []event
		for k := range 10 {
			p := fmt.Sprintf("payload-%d", k)
			s.sends = append(s.sends, send{f: fr(9, true, p), chop: chop})
			ok = append(ok, pong(p))
		}
		add(abCase{id: fmt.Sprintf("2.%d", 10+i), steps: []step{s}, ok: ok, closedByMe: true, codes: []int{normal}})
	}
	// 3: reserved bits (the rsv argument is RSV1<<2 | RSV2<<1 | RSV3).
	hello := "Hello, world!"
	add(abCase{id: "3.1", steps: []step{now(rsvFrame(1, 1, hello))}, codes: []int{protocol}})
	add(abCase{id: "3.2", steps: []step{now(fr(1, true, hello), rsvFrame(1, 2, hello), fr(9, true, ""))}, ok: []event{msg(hello)}, codes: []int{protocol}})
	add(abCase{id: "3.3", steps: []step{chopped(syncWrite, fr(1, true, hello), rsvFrame(1, 3, hello), fr(9, true, ""))}, ok: []event{msg(hello)}, codes: []int{protocol}})
	add(abCase{id: "3.4", steps: []step{chopped(1, fr(1, true, hello), rsvFrame(1, 4, hello), fr(9, true, ""))}, ok: []event{msg(hello)}, codes: []int{protocol}})
	add(abCase{id: "3.5", steps: []step{now(rsvFrame(2, 5, "\x00\xff\xfe\xfd\xfc\xfb\x00\xff"))}, codes: []int{protocol}})
	add(abCase{id: "3.6", steps: []step{now(rsvFrame(2, 6, hello))}, codes: []int{protocol}})
	add(abCase{id: "3.7", steps: []step{now(rsvFrame(8, 7, ""))}, codes: []int{protocol}})
	// 4: reserved opcodes.
	for i, op := range []byte{3, 11} {
		sec := 1 + i
		add(abCase{id: fmt.Sprintf("4.%d.1", sec), steps: []step{now(fr(op, true, ""))}, codes: []int{protocol}})
		add(abCase{id: fmt.Sprintf("4.%d.2", sec), steps: []step{now(fr(op+1, true, "reserved opcode payload"))}, codes: []int{protocol}})
		add(abCase{id: fmt.Sprintf("4.%d.3", sec), steps: []step{now(fr(1, true, hello), fr(op+2, true, ""), fr(9, true, ""))}, ok: []event{msg(hello)}, codes: []int{protocol}})
		add(abCase{id: fmt.Sprintf("4.%d.4", sec), steps: []step{now(fr(1, true, hello), fr(op+3, true, hello), fr(9, true, ""))}, ok: []event{msg(hello)}, codes: []int{protocol}})
		add(abCase{id: fmt.Sprintf("4.%d.5", sec), steps: []step{chopped(1, fr(1, true, hello), fr(op+4, true, hello), fr(9, true, ""))}, ok: []event{msg(hello)}, codes: []int{protocol}})
	}
	// 5: fragmentation.
	add(abCase{id: "5.1", steps: []step{now(fr(9, false, "fragment1"), fr(0, true, "fragment2"))}, codes: []int{protocol}})
	add(abCase{id: "5.2", steps: []step{now(fr(10, false, "fragment1"), fr(0, true, "fragment2"))}, codes: []int{protocol}})
	f12 := "fragment1fragment2"
	for i, chop := range []int{0, syncWrite, 1} {
		add(abCase{id: fmt.Sprintf("5.%d", 3+i), steps: []step{chopped(chop, fr(1, false, "fragment1"), fr(0, true, "fragment2"))},
			ok: []event{msg(f12)}, closedByMe: true, codes: []int{normal}})
		add(abCase{id: fmt.Sprintf("5.%d", 6+i), steps: []step{chopped(chop, fr(1, false, "fragment1"), fr(9, true, "ping payload"), fr(0, true, "fragment2"))},
			ok: []event{pong("ping payload"), msg(f12)}, closedByMe: true, codes: []int{normal}})
		add(abCase{id: fmt.Sprintf("5.%d", 9+i), steps: []step{chopped(chop, fr(0, true, "non-continuation payload"), fr(1, true, hello))}, codes: []int{protocol}})
		add(abCase{id: fmt.Sprintf("5.%d", 12+i), steps: []step{chopped(chop, fr(0, false, "non-continuation payload"), fr(1, true, hello))}, codes: []int{protocol}})
	}
	add(abCase{id: "5.15", steps: []step{now(fr(1, false, "fragment1"), fr(0, true, "fragment2"), fr(0, false, "fragment3"), fr(1, true, "fragment4"))},
		ok: []event{msg(f12)}, codes: []int{protocol}})
	for i, fin := range []bool{false, true} {
		s := step{}
		for range 2 {
			s.sends = append(s.sends, send{f: fr(0, fin, "fragment1")}, send{f: fr(1, false, "fragment2")}, send{f: fr(0, true, "fragment3")})
		}
		add(abCase{id: fmt.Sprintf("5.%d", 16+i), steps: []step{s}, codes: []int{protocol}})
	}
	add(abCase{id: "5.18", steps: []step{now(fr(1, false, "fragment1"), fr(1, true, "fragment2"))}, codes: []int{protocol}})
	for i, chop := range []int{0, syncWrite} {
		add(abCase{id: fmt.Sprintf("5.%d", 19+i), steps: []step{
			chopped(chop, fr(1, false, "fragment1"), fr(0, false, "fragment2"), fr(9, true, "pongme 1!")),
			chopped(chop, fr(0, false, "fragment3"), fr(0, false, "fragment4"), fr(9, true, "pongme 2!"), fr(0, true, "fragment5")),
		}, ok: []event{pong("pongme 1!"), pong("pongme 2!"), msg("fragment1fragment2fragment3fragment4fragment5")}, closedByMe: true, codes: []int{normal}})
	}
	// 6.1-6.4: UTF-8 with empty fragments, fragmented on and inside code
	// points, invalid, and failing fast.
	add(abCase{id: "6.1.1", steps: []step{now(fr(1, true, ""))}, ok: []event{msg("")}, closedByMe: true, codes: []int{normal}})
	add(abCase{id: "6.1.2", steps: []step{now(fr(1, false, ""), fr(0, false, ""), fr(0, true, ""))}, ok: []event{msg("")}, closedByMe: true, codes: []int{normal}})
	add(abCase{id: "6.1.3", steps: []step{now(fr(1, false, ""), fr(0, false, "middle frame payload"), fr(0, true, ""))}, ok: []event{msg("middle frame payload")}, closedByMe: true, codes: []int{normal}})
	hu := "Hello-\u00b5@\u00df\u00f6\u00e4\u00fc\u00e0\u00e1-UTF-8!!"
	add(abCase{id: "6.2.1", steps: []step{now(sendMessage(1, hu, 0)...)}, ok: []event{msg(hu)}, closedByMe: true, codes: []int{normal}})
	add(abCase{id: "6.2.2", steps: []step{now(fr(1, false, "Hello-\u00b5@\u00df\u00f6\u00e4"), fr(0, true, "\u00fc\u00e0\u00e1-UTF-8!!"))}, ok: []event{msg(hu)}, closedByMe: true, codes: []int{normal}})
	add(abCase{id: "6.2.3", steps: []step{now(sendMessage(1, hu, 1)...)}, ok: []event{msg(hu)}, closedByMe: true, codes: []int{normal}})
	kosme := "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5"
	add(abCase{id: "6.2.4", steps: []step{now(sendMessage(1, kosme, 1)...)}, ok: []event{msg(kosme)}, closedByMe: true, codes: []int{normal}})
	bad := kosme + "\xed\xa0\x80" + "edited"
	add(abCase{id: "6.3.1", steps: []step{now(sendMessage(1, bad, 0)...)}, codes: []int{invalid}})
	add(abCase{id: "6.3.2", steps: []step{now(sendMessage(1, bad, 1)...)}, codes: []int{invalid}})
	bad4 := kosme + "\xf4\x90\x80\x80" + "edited"
	// 6.4.1, 6.4.2: three frames, a second apart; 6.4.3, 6.4.4: one frame
	// whose payload comes in three parts a second apart. The strict
	// outcome: failed during the second part.
	parts := [][2]int{{len(kosme), len(kosme) + 4}, {12, 13}}
	for i, cut := range parts {
		p1, p2, p3 := bad4[:cut[0]], bad4[cut[0]:cut[1]], bad4[cut[1]:]
		add(abCase{id: fmt.Sprintf("6.4.%d", 1+i), steps: []step{
			now(fr(1, false, p1)),
			{sends: []send{{f: fr(0, false, p2)}}, mark: "A"},
			{sends: []send{{f: fr(0, true, p3)}}, mark: "B"},
		}, ok: []event{{kind: "timeout", payload: "A"}}, codes: []int{invalid}})
	}
	for i, cut := range parts {
		var enc []byte
		get := func(from, to int) func() []byte {
			return func() []byte {
				if enc == nil {
					enc = wireFrame{op: 1, fin: true, payload: []byte(bad4)}.encode(newRand())
				}
				h := len(enc) - len(bad4)
				if from > 0 {
					from += h
				}
				if to < 0 {
					return enc[from:]
				}
				return enc[from : h+to]
			}
		}
		add(abCase{id: fmt.Sprintf("6.4.%d", 3+i), steps: []step{
			{raw: get(0, cut[0])},
			{raw: get(cut[0], cut[1]), mark: "A"},
			{raw: get(cut[1], -1), mark: "B"},
		}, ok: []event{{kind: "timeout", payload: "A"}}, codes: []int{invalid}})
	}
	// 6.5-6.23: the UTF-8 decoder tests of Markus Kuhn's UTF-8-test.txt,
	// each sequence as one text message.
	for gi, g := range utf8Sequences() {
		for j, s := range g {
			c := abCase{id: fmt.Sprintf("6.%d.%d", 5+gi, j+1), steps: []step{now(fr(1, true, s))}}
			if utf8.ValidString(s) {
				c.ok, c.closedByMe, c.codes = []event{msg(s)}, true, []int{normal}
			} else {
				c.codes = []int{invalid}
			}
			add(c)
		}
	}
	// 7: the closing handshake.
	hw := "Hello World!"
	add(abCase{id: "7.1.1", steps: []step{now(fr(1, true, hw))}, ok: []event{msg(hw)}, closedByMe: true, codes: []int{normal}})
	add(abCase{id: "7.1.2", steps: []step{now(closeFrame(normal, nil), closeFrame(-1, nil))}, closedByMe: true, ownClose: true, codes: []int{normal}})
	add(abCase{id: "7.1.3", steps: []step{now(closeFrame(normal, nil), fr(9, true, ""))}, closedByMe: true, ownClose: true, codes: []int{normal}})
	add(abCase{id: "7.1.4", steps: []step{now(closeFrame(normal, nil), fr(1, true, hw))}, closedByMe: true, ownClose: true, codes: []int{normal}})
	add(abCase{id: "7.1.5", steps: []step{now(fr(1, false, "fragment1"), closeFrame(normal, nil), fr(0, true, "fragment2"))}, closedByMe: true, ownClose: true, codes: []int{normal}})
	big := string(repeat("BAsd7&jh23", 256<<10))
	add(abCase{id: "7.1.6", steps: []step{now(fr(1, true, big), fr(1, true, hw), closeFrame(normal, nil), fr(9, true, ""))},
		ok: []event{msg(big), msg(hw)}, closedByMe: true, ownClose: true, codes: []int{normal}, info: true})
	add(abCase{id: "7.3.1", steps: []step{now(closeFrame(-1, nil))}, closedByMe: true, ownClose: true, codes: []int{normal}})
	add(abCase{id: "7.3.2", steps: []step{now(closeFrame(-1, []byte("a")))}, closedByMe: true, ownClose: true, codes: []int{protocol}})
	add(abCase{id: "7.3.3", steps: []step{now(closeFrame(normal, nil))}, closedByMe: true, ownClose: true, codes: []int{normal}})
	add(abCase{id: "7.3.4", steps: []step{now(closeFrame(normal, []byte(hw)))}, closedByMe: true, ownClose: true, codes: []int{normal}})
	add(abCase{id: "7.3.5", steps: []step{now(closeFrame(normal, []byte(strings.Repeat("*", 123))))}, closedByMe: true, ownClose: true, codes: []int{normal}})
	add(abCase{id: "7.3.6", steps: []step{now(closeFrame(normal, []byte(strings.Repeat("*", 124))))}, closedByMe: true, ownClose: true, codes: []int{protocol}})
	add(abCase{id: "7.5.1", steps: []step{now(closeFrame(normal, []byte(bad)))}, closedByMe: true, ownClose: true, codes: []int{protocol, invalid}})
	for i, code := range []int{1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000, 4999} {
		add(abCase{id: fmt.Sprintf("7.7.%d", i+1), steps: []step{now(closeFrame(code, nil))}, closedByMe: true, ownClose: true, codes: []int{normal, code}})
	}
	for i, code := range []int{0, 999, 1004, 1005, 1006, 1016, 1100, 2000, 2999} {
		add(abCase{id: fmt.Sprintf("7.9.%d", i+1), steps: []step{now(closeFrame(code, nil))}, closedByMe: true, ownClose: true, codes: []int{protocol}})
	}
	for i, code := range []int{5000, 65535} {
		add(abCase{id: fmt.Sprintf("7.13.%d", i+1), steps: []step{now(closeFrame(code, nil))}, closedByMe: true, ownClose: true,
			codes: []int{normal, code, protocol}, info: true})
	}
	return cs
}

// utf8Sequences returns the groups of cases 6.5 to 6.23, in order.
func utf8Sequences() [][]string {
	kosme := "\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5"
	var gs [][]string
	gs = append(gs, []string{"hello\x24world", "hello\xC2\xA2world", "hello\xE2\x82\xACworld", "hello\xF0\xA4\xAD\xA2world", kosme})
	var prefixes []string
	for i := 1; i <= len(kosme); i++ {
		prefixes = append(prefixes, kosme[:i])
	}
	gs = append(gs, prefixes)
	gs = append(gs, []string{"\x00", "\xc2\x80", "\xe0\xa0\x80", "\xf0\x90\x80\x80"})
	gs = append(gs, []string{"\xf8\x88\x80\x80\x80", "\xfc\x84\x80\x80\x80\x80"})
	gs = append(gs, []string{"\x7f", "\xdf\xbf", "\xef\xbf\xbf", "\xf4\x8f\xbf\xbf"})
	gs = append(gs, []string{"\xf7\xbf\xbf\xbf", "\xfb\xbf\xbf\xbf\xbf", "\xfd\xbf\xbf\xbf\xbf\xbf"})
	gs = append(gs, []string{"\xed\x9f\xbf", "\xee\x80\x80", "\xef\xbf\xbd", "\xf4\x8f\xbf\xbf", "\xf4\x90\x80\x80"})
	cont := ""
	for c := 0x80; c < 0xbf; c++ {
		cont += string([]byte{byte(c)})
	}
	gs = append(gs, []string{"\x80", "\xbf", "\x80\xbf", "\x80\xbf\x80", "\x80\xbf\x80\xbf", "\x80\xbf\x80\xbf\x80", "\x80\xbf\x80\xbf\x80\xbf", cont})
	var lonely []string
	for _, r := range [][2]int{{0xc0, 0xdf}, {0xe0, 0xef}, {0xf0, 0xf7}, {0xf8, 0xfb}, {0xfc, 0xfd}} {
		s := ""
		for c := r[0]; c < r[1]; c++ {
			s += string([]byte{byte(c), 0x20})
		}
		lonely = append(lonely, s)
	}
	gs = append(gs, lonely)
	missing := []string{"\xc0", "\xe0\x80", "\xf0\x80\x80", "\xf8\x80\x80\x80", "\xfc\x80\x80\x80\x80",
		"\xdf", "\xef\xbf", "\xf7\xbf\xbf", "\xfb\xbf\xbf\xbf", "\xfd\xbf\xbf\xbf\xbf"}
	gs = append(gs, missing)
	gs = append(gs, []string{strings.Join(missing, "")})
	gs = append(gs, []string{"\xfe", "\xff", "\xfe\xfe\xff\xff"})
	gs = append(gs, []string{"\xc0\xaf", "\xe0\x80\xaf", "\xf0\x80\x80\xaf", "\xf8\x80\x80\x80\xaf", "\xfc\x80\x80\x80\x80\xaf"})
	gs = append(gs, []string{"\xc1\xbf", "\xe0\x9f\xbf", "\xf0\x8f\xbf\xbf", "\xf8\x87\xbf\xbf\xbf", "\xfc\x83\xbf\xbf\xbf\xbf"})
	gs = append(gs, []string{"\xc0\x80", "\xe0\x80\x80", "\xf0\x80\x80\x80", "\xf8\x80\x80\x80\x80", "\xfc\x80\x80\x80\x80\x80"})
	gs = append(gs, []string{"\xed\xa0\x80", "\xed\xad\xbf", "\xed\xae\x80", "\xed\xaf\xbf", "\xed\xb0\x80", "\xed\xbe\x80", "\xed\xbf\xbf"})
	gs = append(gs, []string{"\xed\xa0\x80\xed\xb0\x80", "\xed\xa0\x80\xed\xbf\xbf", "\xed\xad\xbf\xed\xb0\x80", "\xed\xad\xbf\xed\xbf\xbf",
		"\xed\xae\x80\xed\xb0\x80", "\xed\xae\x80\xed\xbf\xbf", "\xed\xaf\xbf\xed\xb0\x80", "\xed\xaf\xbf\xed\xbf\xbf"})
	nonchars := []string{"\xef\xbf\xbe", "\xef\xbf\xbf"}
	for _, z1 := range []byte{0xf0, 0xf1, 0xf2, 0xf3, 0xf4} {
		for _, z2 := range []byte{0x8f, 0x9f, 0xaf, 0xbf} {
			if z1 == 0xf4 && z2 != 0x8f {
				continue
			}
			for _, z3 := range []byte{0xbe, 0xbf} {
				zz := string([]byte{z1, z2, 0xbf, z3})
				if zz != "\xf0\x8f\xbf\xbe" && zz != "\xf0\x8f\xbf\xbf" {
					nonchars = append(nonchars, zz)
				}
			}
		}
	}
	gs = append(gs, nonchars)
	gs = append(gs, []string{"\xef\xbf\xb9", "\xef\xbf\xba", "\xef\xbf\xbb", "\xef\xbf\xbc", "\xef\xbf\xbd", "\xef\xbf\xbe", "\xef\xbf\xbf"})
	return gs
}
