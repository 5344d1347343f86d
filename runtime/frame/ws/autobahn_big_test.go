package ws_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"unicode/utf8"
)

// scale returns n, or n/64 (at least 1 KiB) unless -ws.full: section 9's
// messages run up to 16 MiB, too much for make test under -race.
func scale(n int) int {
	if *full {
		return n
	}
	return max(n/64, 1<<10)
}

// shrink returns a compression case's message size, n, or at most 16 KiB
// unless -ws.full (the fragment sizes stay as published, so that
// fragmented messages stay fragmented).
func shrink(n int) int {
	if *full {
		return n
	}
	return min(n, 16<<10)
}

// count returns n, or the few messages make test sends per case unless
// -ws.full.
func count(n, short int) int {
	if *full {
		return n
	}
	return short
}

func cases9and10() []abCase {
	var cs []abCase
	add := func(c abCase) { cs = append(cs, c) }
	// 9.1, 9.2: one message of increasing size, in one frame.
	for i, n := range []int{64 << 10, 256 << 10, 1 << 20, 4 << 20, 8 << 20, 16 << 20} {
		t := string(repeat("BAsd7&jh23", scale(n)))
		add(abCase{id: fmt.Sprintf("9.1.%d", i+1), steps: []step{now(fr(1, true, t))}, ok: []event{msg(t)}, closedByMe: true, codes: []int{normal}})
		b := string(repeat("\x00\xfe\x23\xfa\xf0", scale(n)))
		add(abCase{id: fmt.Sprintf("9.2.%d", i+1), steps: []step{now(fr(2, true, b))}, ok: []event{binMsg(b)}, closedByMe: true, codes: []int{normal}})
	}
	// 9.3, 9.4: a 4 MiB message in fragments of increasing size.
	for i, frag := range []int{64, 256, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20} {
		n := scale(4 << 20)
		t := strings.Repeat("*", n)
		add(abCase{id: fmt.Sprintf("9.3.%d", i+1), steps: []step{now(sendMessage(1, t, frag)...)}, ok: []event{msg(t)}, closedByMe: true, codes: []int{normal}})
		b := strings.Repeat("\xfe", n)
		add(abCase{id: fmt.Sprintf("9.4.%d", i+1), steps: []step{now(sendMessage(2, b, frag)...)}, ok: []event{binMsg(b)}, closedByMe: true, codes: []int{normal}})
	}
	// 9.5, 9.6: a 1 MiB message in one frame, sent in chops of increasing
	// size.
	for i, chop := range []int{64, 128, 256, 512, 1024, 2048} {
		n := scale(1 << 20)
		t := string(repeat("BAsd7&jh23", n))
		add(abCase{id: fmt.Sprintf("9.5.%d", i+1), steps: []step{chopped(chop, fr(1, true, t))}, ok: []event{msg(t)}, closedByMe: true, codes: []int{normal}})
		b := string(repeat("\x00\xfe\x23\xfa\xf0", n))
		add(abCase{id: fmt.Sprintf("9.6.%d", i+1), steps: []step{chopped(chop, fr(2, true, b))}, ok: []event{binMsg(b)}, closedByMe: true, codes: []int{normal}})
	}
	// 9.7, 9.8: 1000 messages of a size, each sent once the previous echo
	// came back.
	for bin := range 2 {
		for i, n := range []int{0, 16, 64, 256, 1024, 4096} {
			e := msg(strings.Repeat("*", n))
			sec := 7
			if bin == 1 {
				e, sec = binMsg(strings.Repeat("\xfe", n)), 8
			}
			c := abCase{id: fmt.Sprintf("9.%d.%d", sec, i+1), closedByMe: true, codes: []int{normal}}
			for range count(1000, 20) {
				c.messages = append(c.messages, e)
			}
			add(c)
		}
	}
	// 10.1.1: 64 KiB of text cut by the fuzzer into frames of 1300 bytes.
	t := strings.Repeat("*", 65536)
	add(abCase{id: "10.1.1", steps: []step{now(sendMessage(1, t, 1300)...)}, ok: []event{msg(t)}, closedByMe: true, codes: []int{normal}})
	return cs
}

// The payload sizes, message counts and fragment sizes of sections 12 and
// 13 (MSG_SIZES of case12_x_x.py: size, count, fragment).
var compressionSizes = [][3]int{
	{16, 1000, 0}, {64, 1000, 0}, {256, 1000, 0}, {1024, 1000, 0}, {4096, 1000, 0},
	{8192, 1000, 0}, {16384, 1000, 0}, {32768, 1000, 0}, {65536, 1000, 0}, {131072, 1000, 0},
	{8192, 1000, 256}, {16384, 1000, 256}, {32768, 1000, 256}, {65536, 1000, 256}, {131072, 1000, 256},
	{131072, 1000, 1024}, {131072, 1000, 4096}, {131072, 1000, 32768},
}

// testData is a data set of section 12: Autobahn's are files (a JSON
// document, a bitmap, Goethe's Faust, an HTML page, a PDF); these are
// made here with the same character (and the same text/binary kind), since
// the files are not ours to ship.
type testData struct {
	name   string
	binary bool
	data   string
}

var compressionData = sync.OnceValue(makeCompressionData)

func makeCompressionData() []testData {
	rng := rand.New(rand.NewPCG(12, 12))
	words := []string{"der", "die", "das", "Faust", "Mephistopheles", "Gretchen", "Wagner", "Geist", "Himmel", "Erde",
		"Nacht", "Studierzimmer", "Teufel", "schön", "Blümlein", "grün", "Herz", "Seele", "Größe", "Müh'", "ewig", "Liebe"}
	var json, faust, html strings.Builder
	json.WriteString("[")
	for i := 0; json.Len() < 300<<10; i++ {
		fmt.Fprintf(&json, `{"id":%d,"name":"%s %s","score":%.3f,"tags":["%s","%s"],"active":%v,"note":"Größe %d µm"},`,
			i, words[rng.IntN(len(words))], words[rng.IntN(len(words))], rng.Float64()*100,
			words[rng.IntN(len(words))], words[rng.IntN(len(words))], rng.IntN(2) == 0, rng.IntN(1000))
	}
	json.WriteString("{}]")
	for faust.Len() < 300<<10 {
		n := 4 + rng.IntN(8)
		for j := range n {
			if j > 0 {
				faust.WriteByte(' ')
			}
			faust.WriteString(words[rng.IntN(len(words))])
		}
		faust.WriteString(".\n")
	}
	html.WriteString("<!DOCTYPE html><html><head><title>Größe</title></head><body>\n")
	for html.Len() < 300<<10 {
		fmt.Fprintf(&html, "<div class=\"item-%d\"><a href=\"/wiki/%s\">%s</a> <span>%s %s</span></div>\n",
			rng.IntN(50), words[rng.IntN(len(words))], words[rng.IntN(len(words))], words[rng.IntN(len(words))], words[rng.IntN(len(words))])
	}
	// A 512x512 grey bitmap: a smooth picture with some noise.
	bmp := make([]byte, 1078, 1078+512*512)
	copy(bmp, "BM")
	for y := range 512 {
		for x := range 512 {
			bmp = append(bmp, byte((x*y)>>10+x/3+rng.IntN(8)))
		}
	}
	// A PDF: text objects between stretches of already compressed (random)
	// stream data.
	var pdf []byte
	pdf = append(pdf, "%PDF-1.4\n"...)
	for len(pdf) < 300<<10 {
		pdf = fmt.Appendf(pdf, "%d 0 obj\n<< /Length 2048 /Filter /FlateDecode >>\nstream\n", len(pdf))
		for range 2048 {
			pdf = append(pdf, byte(rng.Uint32()))
		}
		pdf = append(pdf, "\nendstream\nendobj\n"...)
	}
	return []testData{
		{"json_data1", false, json.String()},
		{"lena512", true, string(bmp)},
		{"gutenberg_faust", true, faust.String()},
		{"html_data1", false, html.String()},
		{"ooms", true, string(pdf)},
	}
}

// slices returns count messages of size n cut from d one after the other,
// wrapping at its end, as case12_x_x.py's sendOne: a text data set is cut
// by code points (n code points), a binary one by bytes.
func (d testData) slices(n, count int) []event {
	var out []event
	if d.binary {
		p := 0
		for range count {
			var m string
			to := (p + n) % len(d.data)
			if to > p {
				m = d.data[p:to]
			} else {
				m = d.data[p:] + d.data[:to]
			}
			p = to
			out = append(out, binMsg(m))
		}
		return out
	}
	rs := []rune(d.data)
	p := 0
	for range count {
		to := (p + n) % len(rs)
		var m []rune
		if to > p {
			m = rs[p:to]
		} else {
			m = append(append([]rune(nil), rs[p:]...), rs[:to]...)
		}
		p = to
		s := string(m)
		if !utf8.ValidString(s) {
			panic("invalid test text")
		}
		out = append(out, msg(s))
	}
	return out
}

func cases12and13() []abCase {
	var cs []abCase
	data := compressionData()
	// 12: the default offer, five data sets.
	for j, d := range data {
		for i, s := range compressionSizes {
			cs = append(cs, abCase{id: fmt.Sprintf("12.%d.%d", j+1, i+1),
				offers: []string{"permessage-deflate; client_no_context_takeover; client_max_window_bits"},
				gen:    func() []event { return d.slices(shrink(s[0]), count(s[1], 2)) }, fragment: s[2], closedByMe: true, codes: []int{normal}})
		}
	}
	// 13: the offers of DEFLATE_PARAMS (Autobahn's PerMessageDeflateOffer:
	// client_no_context_takeover and client_max_window_bits always, then
	// what the case requests of the server), on the JSON data set.
	const base = "permessage-deflate; client_no_context_takeover; client_max_window_bits"
	offers := [][]string{
		{base},
		{base + "; server_no_context_takeover"},
		{base + "; server_max_window_bits=9"},
		{base + "; server_max_window_bits=15"},
		{base + "; server_no_context_takeover; server_max_window_bits=9"},
		{base + "; server_no_context_takeover; server_max_window_bits=15"},
		{base + "; server_no_context_takeover; server_max_window_bits=9", base + "; server_no_context_takeover", base},
	}
	for j, o := range offers {
		for i, s := range compressionSizes {
			cs = append(cs, abCase{id: fmt.Sprintf("13.%d.%d", j+1, i+1), offers: o,
				gen: func() []event { return data[0].slices(shrink(s[0]), count(s[1], 2)) }, fragment: s[2], closedByMe: true, codes: []int{normal}})
		}
	}
	return cs
}
