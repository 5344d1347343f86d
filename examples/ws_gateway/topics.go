//go:build linux

package main

// topicIndex is one loop's topics: each topic's name once, by a small id,
// and its subscribers in a slice (a publish walks it; a close takes a
// client out in constant time, by the place its membership records). A
// client keeps its first topic's membership in itself, 8 bytes, and the
// loop keeps the rest for the few clients in more than one: an idle
// subscriber costs its topic one pointer and no allocation of its own.
// Only its loop touches it.
type topicIndex struct {
	ids  map[string]uint32 // by name; ids start at 1
	sets []topicSet        // by id; sets[0] is unused
	free []uint32          // ids of topics that emptied, to reuse
	more map[*client][]membership
}

// topicSet is one topic: its name and subscribers.
type topicSet struct {
	name    string
	members []*client
}

// membership is a client's place in one topic: the topic's id, and the
// client's index in its members. A zero id is no topic.
type membership struct{ id, pos uint32 }

func newTopicIndex() topicIndex {
	return topicIndex{ids: map[string]uint32{}, sets: make([]topicSet, 1), more: map[*client][]membership{}}
}

// members returns the subscribers of topic t (nil for a topic nobody is
// in). The slice is the index's: valid until the next join or leave.
func (x *topicIndex) members(t string) []*client {
	if id, ok := x.ids[t]; ok {
		return x.sets[id].members
	}
	return nil
}

// find returns where cl's membership of topic id is kept, or nil.
func (x *topicIndex) find(cl *client, id uint32) *membership {
	if cl.topic.id == id {
		return &cl.topic
	}
	if cl.topic.id == 0 {
		return nil
	}
	more := x.more[cl]
	for i := range more {
		if more[i].id == id {
			return &more[i]
		}
	}
	return nil
}

// join puts cl in topic t; it reports false if cl was in it already. The
// name is copied only for a topic new on this loop.
func (x *topicIndex) join(cl *client, t []byte) bool {
	id, ok := x.ids[string(t)]
	if !ok {
		name := string(t)
		if n := len(x.free); n > 0 {
			id, x.free = x.free[n-1], x.free[:n-1]
			x.sets[id].name = name
		} else {
			id = uint32(len(x.sets))
			x.sets = append(x.sets, topicSet{name: name})
		}
		x.ids[name] = id
	} else if x.find(cl, id) != nil {
		return false
	}
	s := &x.sets[id]
	m := membership{id: id, pos: uint32(len(s.members))}
	s.members = append(s.members, cl)
	if cl.topic.id == 0 {
		cl.topic = m
	} else {
		x.more[cl] = append(x.more[cl], m)
	}
	return true
}

// leave takes cl out of topic t; it reports false if cl was not in it.
func (x *topicIndex) leave(cl *client, t []byte) bool {
	id, ok := x.ids[string(t)]
	if !ok {
		return false
	}
	m := x.find(cl, id)
	if m == nil {
		return false
	}
	x.remove(cl, *m)
	return true
}

// remove takes cl out of the topic of its membership m.
func (x *topicIndex) remove(cl *client, m membership) {
	s := &x.sets[m.id]
	last := len(s.members) - 1
	if moved := s.members[last]; moved != cl {
		s.members[m.pos] = moved
		x.find(moved, m.id).pos = m.pos
	}
	s.members[last] = nil
	s.members = s.members[:last]
	if last == 0 {
		delete(x.ids, s.name)
		*s = topicSet{}
		x.free = append(x.free, m.id)
	} else if cap(s.members) > 64 && len(s.members) < cap(s.members)/4 {
		s.members = append([]*client(nil), s.members...) // a topic that shrank gives its room back
	}
	// Forget the membership: the client's first is replaced by the
	// first of the rest.
	more := x.more[cl]
	if cl.topic.id == m.id {
		if len(more) == 0 {
			cl.topic = membership{}
			return
		}
		cl.topic, more = more[0], more[1:]
	} else {
		for i := range more {
			if more[i].id == m.id {
				more = append(more[:i], more[i+1:]...)
				break
			}
		}
	}
	if len(more) == 0 {
		delete(x.more, cl)
	} else {
		x.more[cl] = more
	}
}

// leaveAll takes cl out of every topic it is in.
func (x *topicIndex) leaveAll(cl *client) {
	for cl.topic.id != 0 {
		x.remove(cl, cl.topic)
	}
}

// topics returns the names of the topics cl is in, in no set order.
func (x *topicIndex) topics(cl *client) []string {
	if cl.topic.id == 0 {
		return nil
	}
	names := []string{x.sets[cl.topic.id].name}
	for _, m := range x.more[cl] {
		names = append(names, x.sets[m.id].name)
	}
	return names
}
