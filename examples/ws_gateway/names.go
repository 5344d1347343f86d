//go:build linux

package main

import (
	"encoding/binary"
	"math"
)

// names is one loop's users' names, end to end in one array: a client
// keeps where its name starts (4 B, client.user) instead of a string of
// its own (16 B and an allocation, decision 0079). Each name is its
// length as a uvarint, then its bytes, so a name of any length fits.
//
// A client that leaves makes a hole. Once the holes add up to more than
// the live names and to more than namesSlack, compact copies the live
// names into a new array, in the order of the loop's clients, and
// rewrites their offsets: linear in the live names, after at least as
// many bytes were freed, so amortised constant per name. The array stays
// within twice the live names plus namesSlack whatever the churn, and is
// let go of once its last client leaves. Only its loop touches it.
type names struct {
	b    []byte
	dead int // bytes of the names whose clients left
}

// namesSlack is the holes kept without a compaction: a few leaving
// clients do not copy a loop's names.
const namesSlack = 4 << 10

// maxNames is how long the array may grow: an offset is 32 bits.
const maxNames = math.MaxUint32

// add appends name and returns where it starts; false if the array would
// pass maxNames (then nothing is added).
func (ns *names) add(name []byte) (uint32, bool) {
	off := len(ns.b)
	if uint64(off)+binary.MaxVarintLen64+uint64(len(name)) > maxNames {
		return 0, false
	}
	ns.b = append(binary.AppendUvarint(ns.b, uint64(len(name))), name...)
	return uint32(off), true
}

// at returns the name at off: a view of the array, valid until the next
// add or free.
func (ns *names) at(off uint32) []byte {
	n, k := binary.Uvarint(ns.b[off:])
	start := int(off) + k
	return ns.b[start : start+int(n) : start+int(n)]
}

// size is the bytes of the name at off, its length included.
func (ns *names) size(off uint32) int {
	n, k := binary.Uvarint(ns.b[off:])
	return k + int(n)
}

// free forgets the name at off, whose client has left; live are the
// clients whose names stay (the leaving one no longer among them), whose
// offsets a compaction rewrites.
func (ns *names) free(off uint32, live []*client) {
	ns.dead += ns.size(off)
	switch inUse := len(ns.b) - ns.dead; {
	case len(live) == 0:
		*ns = names{}
	case ns.dead > inUse && ns.dead > namesSlack:
		ns.compact(live, inUse)
	}
}

// compact copies the names of live, inUse bytes together, into an array
// of their size, and points each client at its name's new place.
func (ns *names) compact(live []*client, inUse int) {
	b := make([]byte, 0, inUse)
	for _, cl := range live {
		k := ns.size(cl.user)
		off := len(b)
		b = append(b, ns.b[cl.user:int(cl.user)+k]...)
		cl.user = uint32(off)
	}
	ns.b, ns.dead = b, 0
}
