//go:build linux

package main

// Keys live in Redis Cluster's 16,384 hash slots: a key's slot is the
// CRC16 of the key, or of its hash tag (the part between the first '{'
// and the next '}', when not empty), as Redis Cluster computes it
// (keyHashSlot). Each slot belongs to one loop, so that keys of one slot
// are on one loop and a command over several keys of one slot runs there
// at once; a command whose keys span slots is refused with CROSSSLOT, as
// Redis Cluster refuses it (docs/decisions/0024-redis-kv-and-proxy.md).

const slots = 16384

var replyCrossSlot = []byte("-CROSSSLOT Keys in request don't hash to the same slot\r\n")

// slotOf returns key's hash slot.
func slotOf(key []byte) uint16 {
	for s := range key {
		if key[s] != '{' {
			continue
		}
		for e := s + 1; e < len(key); e++ {
			if key[e] == '}' {
				if e == s+1 {
					break // "{}": the whole key is hashed
				}
				return crc16(key[s+1:e]) & (slots - 1)
			}
		}
		break
	}
	return crc16(key) & (slots - 1)
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the CRC
// Redis Cluster hashes keys with.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^c]
	}
	return crc
}

var crcTable = func() (t [256]uint16) {
	for i := range 256 {
		crc := uint16(i) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[i] = crc
	}
	return t
}()
