package ws

import (
	"encoding/binary"
	"math/bits"
)

// mask XORs b in place with the masking key, starting at byte phase of the
// key (0 to 3), and returns the phase that follows b: RFC 6455 section
// 5.3's transform, which is its own inverse, so it both masks and unmasks.
//
// Eight bytes at a time (the key repeated twice in a word), 32 per turn of
// the main loop; the loads and stores are unaligned, which amd64 and arm64
// do at full speed and which encoding/binary turns into single moves.
func mask(key [4]byte, phase int, b []byte) int {
	if len(b) < 8 {
		for i := range b {
			b[i] ^= key[(phase+i)&3]
		}
		return (phase + len(b)) & 3
	}
	// The key as it lines up with b[0]: rotated by phase bytes.
	k32 := bits.RotateLeft32(binary.LittleEndian.Uint32(key[:]), -8*phase)
	k := uint64(k32)<<32 | uint64(k32)
	i := 0
	for ; len(b)-i >= 32; i += 32 {
		p := b[i : i+32 : i+32]
		binary.LittleEndian.PutUint64(p[0:], binary.LittleEndian.Uint64(p[0:])^k)
		binary.LittleEndian.PutUint64(p[8:], binary.LittleEndian.Uint64(p[8:])^k)
		binary.LittleEndian.PutUint64(p[16:], binary.LittleEndian.Uint64(p[16:])^k)
		binary.LittleEndian.PutUint64(p[24:], binary.LittleEndian.Uint64(p[24:])^k)
	}
	for ; len(b)-i >= 8; i += 8 {
		p := b[i : i+8 : i+8]
		binary.LittleEndian.PutUint64(p, binary.LittleEndian.Uint64(p)^k)
	}
	// i is a multiple of 4 here, so the phase of b[i] is phase again.
	for j := i; j < len(b); j++ {
		b[j] ^= key[(phase+j-i)&3]
	}
	return (phase + len(b)) & 3
}
