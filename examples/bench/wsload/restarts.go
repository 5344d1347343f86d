//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/percore/percore/internal/hist"
)

// Restarts during fanout (-restarts N): the gateway is sent SIGHUP N
// times, -restart-every apart, its current process read from -pidfile
// (examples/ws_gateway -pidfile); each restart is timed from the signal
// until the new process wrote its PID (ready) and until the old one
// exited. Subscribers never reconnect, so a connection the restart closed
// is an error; every message is checked as in any fanout run. The time
// until the last subscriber has a publish is reported apart for publishes
// sent during a restart (from the signal until the old process exited)
// and the others (docs/performance.md, "Hand-over of WebSocket
// subscribers").

// restartWin is one restart: the signal, the new process ready, the old
// one gone.
type restartWin struct{ start, ready, exited time.Time }

// restarter runs the restarts; its windows are read once done is closed.
type restarter struct {
	wins []restartWin
	err  error
	done chan struct{}
}

func (r *runner) startRestarts(ctx context.Context) *restarter {
	rs := &restarter{done: make(chan struct{})}
	if r.cfg.restarts == 0 {
		close(rs.done)
		return rs
	}
	go func() {
		defer close(rs.done)
		for range r.cfg.restarts {
			if err := sleep(ctx, r.cfg.restartEvery); err != nil {
				return
			}
			w, err := r.restartOnce(ctx)
			if err != nil {
				rs.err = err
				return
			}
			rs.wins = append(rs.wins, w)
		}
	}()
	return rs
}

func readPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// exited reports whether process pid is gone (or a zombie: the first
// gateway is its starter's child).
func exited(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err != nil || strings.Contains(string(st), ") Z ")
}

func (r *runner) restartOnce(ctx context.Context) (restartWin, error) {
	var w restartWin
	old, err := readPID(r.cfg.pidFile)
	if err != nil {
		return w, fmt.Errorf("-pidfile: %w", err)
	}
	w.start = time.Now()
	if err := syscall.Kill(old, syscall.SIGHUP); err != nil {
		return w, fmt.Errorf("SIGHUP %d: %w", old, err)
	}
	deadline := w.start.Add(30 * time.Second)
	for w.exited.IsZero() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return w, fmt.Errorf("restart of %d: not done within 30 s", old)
		}
		if pid, err := readPID(r.cfg.pidFile); w.ready.IsZero() && err == nil && pid != old {
			w.ready = time.Now()
		}
		if !w.ready.IsZero() && exited(old) {
			w.exited = time.Now()
		}
		time.Sleep(200 * time.Microsecond) // polling the processes, not synchronising
	}
	return w, nil
}

// during reports whether a publish sent at t (ns) fell in a restart.
func (rs *restarter) during(t int64) bool {
	for _, w := range rs.wins {
		if t >= w.start.UnixNano() && t <= w.exited.UnixNano() {
			return true
		}
	}
	return false
}

// report fills the result's restart fields from the publishes' send
// times (sent), their last deliveries (last, zero for none) and the
// publishes' round trips (rtt).
func (rs *restarter) report(res *Result, sent, last, rtt []int64) {
	<-rs.done
	if rs.err != nil {
		res.RestartError = rs.err.Error()
	}
	res.Restarts = len(rs.wins)
	for _, w := range rs.wins {
		res.RestartReadyMs = append(res.RestartReadyMs, float64(w.ready.Sub(w.start).Microseconds())/1e3)
		res.RestartExitMs = append(res.RestartExitMs, float64(w.exited.Sub(w.start).Microseconds())/1e3)
	}
	if len(rs.wins) == 0 {
		return
	}
	var in, out, rin, rout hist.Histogram
	for seq := range sent {
		h, rh := &out, &rout
		if rs.during(sent[seq]) {
			h, rh = &in, &rin
			res.PublishesDuringRestart++
		}
		if last[seq] > 0 {
			h.Record(last[seq] - sent[seq])
		}
		rh.Record(rtt[seq])
	}
	res.LastP99DuringUs, res.LastP99OutsideUs = us(&in, 0.99), us(&out, 0.99)
	res.LastMaxDuringUs = us(&in, 1)
	res.PublishP99DuringUs, res.PublishP99OutsideUs = us(&rin, 0.99), us(&rout, 0.99)
}
