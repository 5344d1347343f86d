//go:build linux

package main

import "math"

// seat is a client's place in its loop's list of clients (ls.clients,
// the list the heartbeat sweeps) and the heartbeat's count of sweeps
// since it last sent anything, in one word: the index above the low
// silentBits, the count (saturating at silentMax) in them. One word for
// both keeps the client in the 64-byte size class (decision 0079).
type seat uint32

const (
	silentBits = 3
	silentMax  = 1<<silentBits - 1 // the heartbeat closes at 5
	// seatGone is the seat of a client that left the list.
	seatGone seat = math.MaxUint32
	// maxClients is how many clients a loop's list holds.
	maxClients = int(seatGone>>silentBits) - 1
)

func seatAt(i int) seat { return seat(i) << silentBits }

// index is the client's place in ls.clients.
func (s seat) index() int { return int(s >> silentBits) }

// gone reports whether the client left the list.
func (s seat) gone() bool { return s>>silentBits == seatGone>>silentBits }

// silent is the heartbeat sweeps since the client last sent anything.
func (s seat) silent() int { return int(s & silentMax) }

// heard resets the count: the client sent something.
func (s *seat) heard() { *s &^= silentMax }

// missed counts a sweep without a word from the client.
func (s *seat) missed() {
	if *s&silentMax < silentMax {
		*s++
	}
}

// moveTo gives the client place i in the list, keeping its count.
func (s *seat) moveTo(i int) { *s = seatAt(i) | *s&silentMax }

// enter puts cl in its loop's list of clients, with its user's name in
// the loop's names; false if either is full (nothing is changed then).
func (ls *loopState) enter(cl *client, user []byte) bool {
	if len(ls.clients) >= maxClients {
		return false
	}
	off, ok := ls.names.add(user)
	if !ok {
		return false
	}
	cl.user = off
	cl.seat = seatAt(len(ls.clients))
	ls.clients = append(ls.clients, cl)
	return true
}

// exit takes cl out of the list (the last client takes its place) and
// frees its name.
func (ls *loopState) exit(cl *client) {
	i, end := cl.seat.index(), len(ls.clients)-1
	last := ls.clients[end]
	last.seat.moveTo(i)
	ls.clients[i] = last
	ls.clients[end] = nil
	ls.clients = ls.clients[:end]
	cl.seat = seatGone
	ls.names.free(cl.user, ls.clients)
}

// user returns cl's user's name: a view of the loop's names, valid until
// a client next enters or leaves the loop.
func (ls *loopState) user(cl *client) []byte { return ls.names.at(cl.user) }
