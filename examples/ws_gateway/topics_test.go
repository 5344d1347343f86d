//go:build linux

package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTopicIndexModel drives a loop's topic index with random joins,
// leaves and closes of 40 clients over 12 topics, against a map of sets,
// checking after every step that each topic's members are exactly the
// model's, that every membership records its client's place, and that a
// topic nobody is in is gone (its id free for the next).
func TestTopicIndexModel(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 65))
		x := newTopicIndex()
		clients := make([]*client, 40)
		for i := range clients {
			clients[i] = &client{seat: seatAt(i)}
		}
		model := map[string]map[*client]bool{}
		for step := range 1500 {
			cl := clients[rng.IntN(len(clients))]
			name := fmt.Sprintf("t%d", rng.IntN(12))
			switch op := rng.IntN(10); {
			case op < 5:
				in := model[name][cl]
				if got := x.join(cl, []byte(name)); got == in {
					t.Fatalf("seed %d step %d: join %s reported %v with the client in it %v", seed, step, name, got, in)
				}
				if model[name] == nil {
					model[name] = map[*client]bool{}
				}
				model[name][cl] = true
			case op < 9:
				in := model[name][cl]
				if got := x.leave(cl, []byte(name)); got != in {
					t.Fatalf("seed %d step %d: leave %s reported %v with the client in it %v", seed, step, name, got, in)
				}
				delete(model[name], cl)
			default:
				x.leaveAll(cl)
				for _, set := range model {
					delete(set, cl)
				}
			}
			for name, set := range model {
				if len(set) == 0 {
					delete(model, name)
				}
			}
			checkTopicIndex(t, fmt.Sprintf("seed %d step %d", seed, step), x, clients, model)
		}
	}
}

func checkTopicIndex(t *testing.T, at string, x topicIndex, clients []*client, model map[string]map[*client]bool) {
	t.Helper()
	if len(x.ids) != len(model) {
		t.Fatalf("%s: %d topics, want %d", at, len(x.ids), len(model))
	}
	for name, set := range model {
		members := x.members(name)
		if len(members) != len(set) {
			t.Fatalf("%s: topic %s has %d members, want %d", at, name, len(members), len(set))
		}
		id := x.ids[name]
		for pos, cl := range members {
			if !set[cl] {
				t.Fatalf("%s: client %d in topic %s, not in the model", at, cl.seat.index(), name)
			}
			if m := x.find(cl, id); m == nil || m.pos != uint32(pos) {
				t.Fatalf("%s: client %d's membership of %s is %v, want its place %d", at, cl.seat.index(), name, m, pos)
			}
		}
	}
	for _, cl := range clients {
		var want []string
		for name, set := range model {
			if set[cl] {
				want = append(want, name)
			}
		}
		got := x.topics(cl)
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: client %d is in %v, want %v", at, cl.seat.index(), got, want)
		}
		if _, extra := x.more[cl]; extra && len(want) < 2 {
			t.Fatalf("%s: client %d in %d topics keeps an entry for more", at, cl.seat.index(), len(want))
		}
	}
	for _, id := range x.free {
		if len(x.sets[id].members) != 0 || x.sets[id].name != "" {
			t.Fatalf("%s: free id %d still holds topic %q", at, id, x.sets[id].name)
		}
	}
}

// TestUpgradeKeepsWhatItAllocates: the token check of an upgrade and a
// subscription to a topic the loop has allocate nothing (the garbage that
// made the heap goal double an idle gateway's memory: decision 0065).
func TestUpgradeKeepsWhatItAllocates(t *testing.T) {
	ls := &loopState{topics: newTopicIndex(), mac: hmac.New(sha256.New, []byte("s"))}
	user := []byte("u42")
	m := hmac.New(sha256.New, []byte("s"))
	m.Write(user)
	token := []byte(hex.EncodeToString(m.Sum(nil)))
	bad := append([]byte(nil), token...)
	bad[0] ^= 1
	if !ls.validToken(user, token) || ls.validToken(user, bad) || ls.validToken([]byte("u43"), token) {
		t.Fatal("validToken: a good token refused or a bad one taken")
	}
	if n := testing.AllocsPerRun(100, func() { ls.validToken(user, token) }); n != 0 {
		t.Fatalf("validToken allocates %v times a call", n)
	}
	clients := make([]*client, 1000)
	for i := range clients {
		clients[i] = &client{}
	}
	ls.topics.join(clients[0], []byte("bench"))
	ls.topics.members("bench") // grown once below, then reused
	topic := []byte("bench")
	i := 1
	n := testing.AllocsPerRun(500, func() {
		ls.topics.join(clients[i], topic)
		ls.topics.leave(clients[i], topic)
		i = 1 + i%999
	})
	if n != 0 {
		t.Fatalf("joining and leaving a topic the loop has allocates %v times", n)
	}
}
