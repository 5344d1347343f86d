//go:build linux

package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/percore/percore/internal/sys"
)

// The channel a restart hands connections over on (docs/decisions/0054):
// a connected pair of Unix SOCK_SEQPACKET sockets, one end in each
// process. Each message carries up to handoffBatch descriptors
// (SCM_RIGHTS) and, for each, a record: the listener it was accepted from
// and the state its handler attached (OnHandover). The new process answers
// every message with an acknowledgement naming how many descriptors it
// received; the old one keeps its own descriptor of each connection until
// then, so that a message the new process never took (it died, or ran out
// of descriptors) loses no connection: the old process serves it on.
//
//	message: "PCH1" | seq u32 | n u32 | n × (nameLen u16 | name | stateLen u32 | state)
//	ack:     seq u32 | taken u32
//
// Integers are little-endian. A message is at most handoffMsgMax bytes.

const (
	// handoffBatch bounds the descriptors of one message (the kernel's
	// SCM_MAX_FD is 253) and of one loop's batch with the sender, so
	// that each process holds at most a few hundred descriptors more
	// than its connections while a hand-over runs.
	handoffBatch = 200
	// MaxHandoverState bounds the bytes a handler may attach to one
	// connection it hands over (HandoverHandler): a connection whose
	// state is larger is not handed over but closed the protocol's way.
	MaxHandoverState = 8 << 10
	// handoffMsgMax bounds a message: records are packed until the next
	// would pass it (one record alone always fits).
	handoffMsgMax = 64 << 10
	// handoffHeader is the message's fixed part; handoffAckLen the ack's.
	handoffHeader = 12
	handoffAckLen = 8
	// maxListenerName bounds a record's listener name.
	maxListenerName = 1 << 10
)

var handoffMagic = [4]byte{'P', 'C', 'H', '1'}

// HandoffFileName is the name HandoverSockets gives the new process's end
// of the channel, by which HandoffFile finds it among the files
// ListenFiles returns in the new process.
const HandoffFileName = "percore-handoff"

// HandoverSockets returns the two ends of a channel for handing
// connections to a new process: keep old for HandOver, and pass next to
// the new process with the listener files (exec.Cmd.ExtraFiles and
// HandoverEnv, after them), which finds it with HandoffFile and passes it
// to Adopt. Close next in this process once the new one has started.
func HandoverSockets() (old, next *os.File, err error) {
	a, b, err := sys.SeqpacketPair()
	if err != nil {
		return nil, nil, fmt.Errorf("percore: hand-over sockets: %w", err)
	}
	return os.NewFile(uintptr(a), "percore-handoff-old"), os.NewFile(uintptr(b), HandoffFileName), nil
}

// HandoffFile splits what ListenFiles returned into the listening
// sockets (for Config.Inherited) and the channel an old process hands its
// connections over on (for Adopt), nil when it passed none.
func HandoffFile(files []*os.File) (listeners []*os.File, channel *os.File) {
	for _, f := range files {
		if f.Name() == HandoffFileName && channel == nil {
			channel = f
			continue
		}
		listeners = append(listeners, f)
	}
	return listeners, channel
}

// handoffConn wraps f, which must be a connected Unix SOCK_SEQPACKET
// socket, as the channel; f may be closed afterwards (the conn has its own
// descriptor).
func handoffConn(f *os.File) (*net.UnixConn, error) {
	if f == nil {
		return nil, errors.New("percore: hand-over channel: no file")
	}
	nc, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("percore: hand-over channel %s: %w", f.Name(), err)
	}
	uc, ok := nc.(*net.UnixConn)
	if !ok || uc.LocalAddr().Network() != "unixpacket" {
		nc.Close()
		return nil, fmt.Errorf("percore: hand-over channel %s is not a Unix SOCK_SEQPACKET socket (%s)", f.Name(), nc.LocalAddr().Network())
	}
	return uc, nil
}

// handoffRecord is one connection of a message: its listener's name and
// its handler's state. In a decoded message both alias the message.
type handoffRecord struct {
	ln    string
	state []byte
}

// recordLen is the encoded size of r.
func recordLen(ln string, state []byte) int { return 2 + len(ln) + 4 + len(state) }

// appendHeader starts message seq of n records in b.
func appendHeader(b []byte, seq uint32, n int) []byte {
	b = append(b, handoffMagic[:]...)
	b = binary.LittleEndian.AppendUint32(b, seq)
	return binary.LittleEndian.AppendUint32(b, uint32(n))
}

// appendRecord adds a record to a message.
func appendRecord(b []byte, ln string, state []byte) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(len(ln)))
	b = append(b, ln...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(state)))
	return append(b, state...)
}

// errHandoffMessage is a message that does not parse.
var errHandoffMessage = errors.New("percore: malformed hand-over message")

// decodeHandoff parses a message into recs (reused), with every bound
// checked: a short, long or inconsistent message is an error.
func decodeHandoff(b []byte, recs []handoffRecord) (seq uint32, _ []handoffRecord, err error) {
	bad := func(what string) (uint32, []handoffRecord, error) {
		return seq, recs[:0], fmt.Errorf("%w: %s", errHandoffMessage, what)
	}
	if len(b) < handoffHeader || [4]byte(b[:4]) != handoffMagic {
		return bad("no header")
	}
	seq = binary.LittleEndian.Uint32(b[4:])
	n := binary.LittleEndian.Uint32(b[8:])
	if n > handoffBatch {
		return bad(fmt.Sprintf("%d records", n))
	}
	recs = recs[:0]
	p := b[handoffHeader:]
	for range n {
		if len(p) < 2 {
			return bad("truncated record")
		}
		nl := int(binary.LittleEndian.Uint16(p))
		p = p[2:]
		if nl > maxListenerName || len(p) < nl+4 {
			return bad("truncated listener name")
		}
		ln := string(p[:nl])
		p = p[nl:]
		sl := binary.LittleEndian.Uint32(p)
		p = p[4:]
		if sl > MaxHandoverState || uint32(len(p)) < sl {
			return bad("truncated state")
		}
		var st []byte
		if sl > 0 {
			st = p[:sl:sl]
		}
		recs = append(recs, handoffRecord{ln: ln, state: st})
		p = p[sl:]
	}
	if len(p) != 0 {
		return bad("trailing bytes")
	}
	return seq, recs, nil
}

// appendAck is the new process's answer to message seq.
func appendAck(b []byte, seq uint32, taken int) []byte {
	b = binary.LittleEndian.AppendUint32(b, seq)
	return binary.LittleEndian.AppendUint32(b, uint32(taken))
}
