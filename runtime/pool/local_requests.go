package pool

import "time"

// Gets that wait: their records, their deadlines and the two queues they sit in.

// newRequest registers a get that cannot be served at once, and makes sure
// a timer will end it at its deadline.
func (l *Local[C]) newRequest(done func(Lease[C], error)) *request[C] {
	var r *request[C]
	if n := len(l.freeReqs); n > 0 {
		r = l.freeReqs[n-1]
		l.freeReqs[n-1] = nil
		l.freeReqs = l.freeReqs[:n-1]
	} else {
		r = new(request[C])
	}
	now := l.clock()
	l.seq++
	r.done, r.start, r.seq = done, now, l.seq
	l.active.pushBack(r)
	if l.cfg.timeout > 0 { // else gets wait as long as it takes
		r.deadline = now.Add(l.cfg.timeout)
		if l.cancelDeadline == nil {
			l.armDeadline(r.deadline, now)
		}
	}
	return r
}

func (l *Local[C]) freeRequest(r *request[C]) {
	*r = request[C]{}
	l.freeReqs = append(l.freeReqs, r)
}

// armDeadline sets the one timer that ends gets at their deadline. The
// connection timeout is the same for every get, so the oldest get has the
// earliest deadline: the timer is armed for it, and re-armed for the next
// when it fires (a get served before its deadline costs no timer work).
func (l *Local[C]) armDeadline(at, now time.Time) {
	l.cancelDeadline = l.loop.Schedule(max(at.Sub(now), 0), l.expireFn)
}

// expire ends the gets whose deadline has passed with ErrTimeout.
func (l *Local[C]) expire() {
	l.cancelDeadline = nil
	if l.closed {
		return
	}
	now := l.clock()
	for r := l.active.head; r != nil && !r.deadline.After(now); r = l.active.head {
		l.detach(r)
		l.fail(r, ErrTimeout)
	}
	if r := l.active.head; r != nil && l.cancelDeadline == nil && !l.closed {
		l.armDeadline(r.deadline, now)
	}
}

// requestList is the list of gets in progress, linked through prev/next.
type requestList[C any] struct {
	head, tail *request[C]
	len        int
}

func (q *requestList[C]) pushBack(r *request[C]) {
	r.prev, r.next = q.tail, nil
	if q.tail != nil {
		q.tail.next = r
	} else {
		q.head = r
	}
	q.tail = r
	q.len++
}

func (q *requestList[C]) remove(r *request[C]) {
	if r.prev != nil {
		r.prev.next = r.next
	} else {
		q.head = r.next
	}
	if r.next != nil {
		r.next.prev = r.prev
	} else {
		q.tail = r.prev
	}
	r.prev, r.next = nil, nil
	q.len--
}

// waitQueue is the FIFO of waiting gets, linked through qprev/qnext (a
// waiting get is in the list of gets in progress too).
type waitQueue[C any] struct {
	head, tail *request[C]
	len        int
}

// insert queues r in arrival order: at the back for a new get, ahead of
// younger waiters for one that retries after a failed validation.
func (q *waitQueue[C]) insert(r *request[C]) {
	at := q.tail
	for at != nil && at.seq > r.seq {
		at = at.qprev
	}
	r.qprev = at
	if at == nil {
		r.qnext = q.head
		q.head = r
	} else {
		r.qnext = at.qnext
		at.qnext = r
	}
	if r.qnext != nil {
		r.qnext.qprev = r
	} else {
		q.tail = r
	}
	q.len++
}

func (q *waitQueue[C]) popFront() *request[C] {
	r := q.head
	if r != nil {
		q.remove(r)
	}
	return r
}

func (q *waitQueue[C]) remove(r *request[C]) {
	if r.qprev != nil {
		r.qprev.qnext = r.qnext
	} else {
		q.head = r.qnext
	}
	if r.qnext != nil {
		r.qnext.qprev = r.qprev
	} else {
		q.tail = r.qprev
	}
	r.qprev, r.qnext = nil, nil
	q.len--
}
