package ws_test

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
)

// The Autobahn fuzzingclient's side of a connection, written for the tests
// apart from the codec (so that the codec is not checked against itself):
// it builds the frames a case sends, masked as a client's, and reads what
// the endpoint under test answered.

// wireFrame is one frame the fuzzer sends.
type wireFrame struct {
	op      byte
	fin     bool
	rsv     byte // the three reserved bits, RSV1 = 4
	payload []byte
	// closing marks a Close sent by sendClose/sendCloseFrame, which starts
	// the fuzzer's closing handshake (a Close sent with sendFrame does
	// not: case 3.7).
	closing bool
}

// encode returns the frame's bytes, masked with a random key, with the
// shortest length encoding.
func (f wireFrame) encode(rng *rand.Rand) []byte {
	b0 := f.op | f.rsv<<4
	if f.fin {
		b0 |= 0x80
	}
	out := []byte{b0}
	n := len(f.payload)
	switch {
	case n <= 125:
		out = append(out, 0x80|byte(n))
	case n <= 0xFFFF:
		out = append(out, 0x80|126)
		out = binary.BigEndian.AppendUint16(out, uint16(n))
	default:
		out = append(out, 0x80|127)
		out = binary.BigEndian.AppendUint64(out, uint64(n))
	}
	var key [4]byte
	binary.LittleEndian.PutUint32(key[:], rng.Uint32())
	out = append(out, key[:]...)
	for i, c := range f.payload {
		out = append(out, c^key[i&3])
	}
	return out
}

// repeat returns payload repeated to n bytes (Autobahn's payload_len).
func repeat(payload string, n int) []byte {
	out := make([]byte, n)
	for i := 0; i < n; i += len(payload) {
		copy(out[i:], payload)
	}
	return out
}

// event is what the fuzzer received, in Autobahn's terms.
type event struct {
	kind    string // "message", "pong", "timeout"
	payload string
	binary  bool
}

func (e event) String() string {
	p := e.payload
	if len(p) > 40 {
		p = fmt.Sprintf("%.40q... (%d bytes)", p, len(p))
	} else {
		p = fmt.Sprintf("%q", p)
	}
	return fmt.Sprintf("(%s %s bin=%v)", e.kind, p, e.binary)
}

// reader parses an endpoint's output (a server's: unmasked frames), joins
// messages, inflates compressed ones, and records events.
type reader struct {
	buf        []byte
	msg        []byte
	msgOp      byte
	compressed bool
	events     []event
	closed     bool // a Close frame arrived
	closeCode  int  // its code, -1 for none
	err        error

	// permessage-deflate, the reading direction
	inflate    bool // server_no_context_takeover not agreed: keep a window
	window     []byte
	windowSize int
}

func (r *reader) feed(b []byte) {
	r.buf = append(r.buf, b...)
	for r.err == nil && !r.closed {
		if len(r.buf) < 2 {
			return
		}
		b0, b1 := r.buf[0], r.buf[1]
		if b1&0x80 != 0 {
			r.err = fmt.Errorf("masked frame from the server")
			return
		}
		h, n := 2, uint64(b1&0x7F)
		switch n {
		case 126:
			if len(r.buf) < 4 {
				return
			}
			n, h = uint64(binary.BigEndian.Uint16(r.buf[2:])), 4
		case 127:
			if len(r.buf) < 10 {
				return
			}
			n, h = binary.BigEndian.Uint64(r.buf[2:]), 10
		}
		if uint64(len(r.buf)-h) < n {
			return
		}
		p := r.buf[h : h+int(n)]
		op, fin, rsv := b0&0x0F, b0&0x80 != 0, b0>>4&7
		if rsv&3 != 0 || (rsv&4 != 0 && (op == 0 || op >= 8)) {
			r.err = fmt.Errorf("reserved bits %d on opcode %d", rsv, op)
			return
		}
		switch op {
		case 0x9:
			r.err = fmt.Errorf("unexpected ping from the server")
		case 0xA:
			r.events = append(r.events, event{kind: "pong", payload: string(p)})
		case 0x8:
			r.closed, r.closeCode = true, -1
			if len(p) >= 2 {
				r.closeCode = int(binary.BigEndian.Uint16(p))
			}
		case 0x1, 0x2, 0x0:
			if (op == 0) != (r.msgOp != 0) {
				r.err = fmt.Errorf("bad fragmentation: opcode %d", op)
				return
			}
			if op != 0 {
				r.msgOp, r.compressed, r.msg = op, rsv&4 != 0, r.msg[:0]
			}
			r.msg = append(r.msg, p...)
			if fin {
				m := r.msg
				if r.compressed {
					m, r.err = r.inflateMessage(m)
				}
				r.events = append(r.events, event{kind: "message", payload: string(m), binary: r.msgOp == 2})
				r.msgOp = 0
			}
		default:
			r.err = fmt.Errorf("opcode %d", op)
		}
		r.buf = r.buf[h+int(n):]
	}
}

func (r *reader) inflateMessage(m []byte) ([]byte, error) {
	src := append(append([]byte(nil), m...), 0x00, 0x00, 0xFF, 0xFF, 0x01, 0x00, 0x00, 0xFF, 0xFF)
	var dict []byte
	if r.inflate {
		dict = r.window
	}
	out, err := io.ReadAll(flate.NewReaderDict(bytes.NewReader(src), dict))
	if err != nil {
		return nil, fmt.Errorf("inflate: %w", err)
	}
	if r.inflate {
		r.window = append(r.window, out...)
		if len(r.window) > r.windowSize {
			r.window = append([]byte(nil), r.window[len(r.window)-r.windowSize:]...)
		}
	}
	return out, nil
}

// deflater is the fuzzer's compressor (its sending direction).
type deflater struct {
	buf   bytes.Buffer
	w     *flate.Writer
	reset bool // client_no_context_takeover agreed
}

func newDeflater(reset bool) *deflater {
	d := &deflater{reset: reset}
	d.w, _ = flate.NewWriter(&d.buf, flate.BestSpeed)
	return d
}

func (d *deflater) compress(p []byte) []byte {
	d.buf.Reset()
	if d.reset {
		d.w.Reset(&d.buf)
	}
	d.w.Write(p)
	d.w.Flush()
	out := d.buf.Bytes()
	if bytes.HasSuffix(out, []byte{0, 0, 0xFF, 0xFF}) {
		out = out[:len(out)-4]
	}
	return append([]byte(nil), out...)
}

// message returns the frames of a message of op with payload p, cut into
// frames of fragment bytes (0: one frame), compressed with d first when
// d is not nil (RSV1 on the first frame).
func message(op byte, p []byte, fragment int, d *deflater) []wireFrame {
	var rsv byte
	if d != nil {
		p, rsv = d.compress(p), 4
	}
	if fragment <= 0 || len(p) <= fragment {
		return []wireFrame{{op: op, fin: true, rsv: rsv, payload: p}}
	}
	var fs []wireFrame
	for i := 0; i < len(p); i += fragment {
		end := min(i+fragment, len(p))
		f := wireFrame{op: 0, fin: end == len(p), payload: p[i:end]}
		if i == 0 {
			f.op, f.rsv = op, rsv
		}
		fs = append(fs, f)
	}
	return fs
}

// closeFrame returns a Close with code (0: none) and the raw reason.
func closeFrame(code int, reason []byte) wireFrame {
	var p []byte
	if code >= 0 {
		p = binary.BigEndian.AppendUint16(nil, uint16(code))
	}
	return wireFrame{op: 8, fin: true, payload: append(p, reason...), closing: true}
}
