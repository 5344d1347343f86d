//go:build linux

// Command wsload is the load tool of issue 27's WebSocket gateway
// benchmark: it drives a gateway that speaks the protocol of
// examples/bench/gwproto (examples/ws_gateway, and the peers in
// baseline/wsnbio, wsgws, wsgorilla) in one of four modes, checks every
// message, and reports one result (-json: one JSON object, as load does).
//
//	wsload -mode idle   -conns 18000 -server-pid PID   # RSS growth per connection
//	wsload -mode fanout -conns 18000 -publishes 1      # one publish to all: time to the last
//	wsload -mode fanout -conns 18000 -interval 10ms -seconds 10   # delivery latency
//	wsload -mode echo   -conns 1000 -bytes 64 -seconds 5          # closed-loop binary echo
//	wsload -mode storm  -conns 15000                   # all reconnect at once
//	wsload -mode halfopen -conns 15000 -hold 30s       # upgrades that never finish their head
//
// idle opens -conns authenticated connections, each subscribed (its SUB
// acknowledged), reads the server's VmRSS before the first and after the
// last plus -settle, and reports the growth per connection; a publish to
// all of them then checks that every one is open and subscribed.
//
// fanout subscribes -conns connections to a topic; a publisher POSTs a
// message every -interval (-publishes of them, or -seconds/-interval), each
// carrying its sequence number and send time. Every subscriber checks that
// it receives every message once and in order; the latency of each
// delivery (receive time less send time), the time until the last
// subscriber has each publish, and the server's CPU per delivered message
// (from -server-pid's /proc stat over the publishing and the drain) are
// reported.
//
// echo runs -conns connections each sending a -bytes binary message and
// waiting for its echo (closed loop), for -warmup then -seconds: messages
// per second, round-trip percentiles, the server's CPU per message. Every
// echo is compared with what was sent.
//
// storm subscribes -conns connections, starts a live client that sends a
// binary message every -live-interval and times its echo, then closes all
// the subscribers at once (abortively: no TIME_WAIT) and has each redial
// and resubscribe at once, retrying with exponential back-off on any
// failure; it reports the time until all are subscribed again and the
// live client's round trips before and during the storm, then checks with
// one publish that every subscriber is back. The live client is a second
// wsload process (-mode live, live.go), so that its round trips are not
// queued behind the storm's goroutines in one Go scheduler.
//
// halfopen opens -conns connections that each send the start of an
// upgrade request and never finish its head (issue 27's "half-open
// upgrades"); the gateway must close each within -hold (its head timeout),
// and its RSS growth per connection is reported (halfopen.go).
//
// Every mode is bounded by -timeout. The client holds one goroutine per
// connection over net.Conn (the standard library's netpoller) with
// gwproto.Client, a 256-byte read buffer each; it reports its own RSS
// growth per connection and goroutines, so that a reader can tell it was
// not the bottleneck. From 127.0.0.1 it dials from -src-ips loopback
// addresses (127.0.0.1, .2, ...) so that its ports do not run out.
//
// The exit status is 0 for a clean run, 1 when a message was lost,
// duplicated, out of order or different from what was sent, a connection
// failed, or a publish reached fewer subscribers than the tool holds, and
// 2 when the run could not start.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

type config struct {
	mode         string
	addr         string
	secret       string
	conns        int
	bytes        int
	topic        string
	serverPID    int
	json         bool
	settle       time.Duration
	interval     time.Duration
	seconds      time.Duration
	warmup       time.Duration
	publishes    int
	drain        time.Duration
	timeout      time.Duration
	dialConc     int
	srcIPs       int
	liveInterval time.Duration
	liveBefore   time.Duration
	hold         time.Duration
	restarts     int
	restartEvery time.Duration
	pidFile      string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "wsload: %v\n", err)
		return 2
	}
	raiseFDLimit()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	if cfg.mode == "live" {
		return runLive(ctx, cfg, stdout, stderr)
	}
	r := &runner{cfg: cfg, stderr: stderr}
	res, err := r.run(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "wsload: %v\n", err)
		return 2
	}
	res.Problem = res.problem()
	if cfg.json {
		if err := json.NewEncoder(stdout).Encode(res); err != nil {
			fmt.Fprintf(stderr, "wsload: %v\n", err)
			return 2
		}
	} else {
		res.writeText(stdout)
	}
	if res.Problem != "" {
		fmt.Fprintf(stderr, "wsload: %s\n", res.Problem)
		return 1
	}
	return 0
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("wsload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.mode, "mode", "fanout", "idle, fanout, echo, storm or halfopen (live: the storm's live client, which storm starts)")
	fs.StringVar(&c.addr, "addr", "127.0.0.1:7300", "the gateway's address")
	fs.StringVar(&c.secret, "secret", "percore", "the gateway's -secret")
	fs.IntVar(&c.conns, "conns", 100, "connections (subscribers; echo: senders)")
	fs.IntVar(&c.bytes, "bytes", 64, "message size in bytes (fanout: the published body; echo: each binary message)")
	fs.StringVar(&c.topic, "topic", "bench", "the topic subscribers join")
	fs.IntVar(&c.serverPID, "server-pid", 0, "the gateway's process: its memory and CPU are read from /proc")
	fs.BoolVar(&c.json, "json", false, "print the result as one JSON object")
	fs.DurationVar(&c.settle, "settle", 2*time.Second, "idle: wait this long after the last connection before reading the server's memory")
	fs.DurationVar(&c.interval, "interval", 10*time.Millisecond, "fanout: time between publishes")
	fs.DurationVar(&c.seconds, "seconds", 5*time.Second, "fanout: publish for this long (unless -publishes); echo: the measurement window")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "echo: traffic before the window")
	fs.IntVar(&c.publishes, "publishes", 0, "fanout: this many publishes (0: -seconds / -interval)")
	fs.DurationVar(&c.drain, "drain", 10*time.Second, "fanout: after the last publish, wait at most this long for every delivery")
	fs.DurationVar(&c.timeout, "timeout", 5*time.Minute, "bound on the whole run")
	fs.IntVar(&c.dialConc, "dial-concurrency", 64, "connections being opened at once (not in a storm, where all redial at once)")
	fs.IntVar(&c.srcIPs, "src-ips", 8, "dial 127.0.0.1 from this many loopback source addresses")
	fs.DurationVar(&c.liveInterval, "live-interval", time.Millisecond, "storm: the live client sends one message this often")
	fs.DurationVar(&c.liveBefore, "live-before", time.Second, "storm: time the live client's round trips before the storm for this long")
	fs.DurationVar(&c.hold, "hold", 30*time.Second, "halfopen: a connection the server has not closed this long after it was opened is an error")
	fs.IntVar(&c.restarts, "restarts", 0, "fanout: send the gateway SIGHUP this many times while publishing (its PID from -pidfile; restarts.go)")
	fs.DurationVar(&c.restartEvery, "restart-every", 2*time.Second, "fanout: time between restarts (and before the first)")
	fs.StringVar(&c.pidFile, "pidfile", "", "fanout with -restarts: the file the gateway writes its PID to (ws_gateway -pidfile)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch {
	case !strings.Contains(" idle fanout echo storm halfopen live ", " "+c.mode+" "):
		return c, fmt.Errorf("-mode must be idle, fanout, echo, storm or halfopen, not %q", c.mode)
	case c.conns < 1:
		return c, errors.New("-conns must be at least 1")
	case c.mode == "fanout" && c.bytes < 48:
		return c, errors.New("-bytes must be at least 48 in fanout (the sequence number and time)")
	case c.mode == "echo" && c.bytes < 16:
		return c, errors.New("-bytes must be at least 16 in echo (the sequence number and time)")
	case c.bytes > 1<<20:
		return c, errors.New("-bytes must be at most 1 MiB")
	case c.interval <= 0 || c.seconds <= 0 || c.warmup < 0 || c.settle < 0 || c.drain <= 0 || c.timeout <= 0:
		return c, errors.New("-interval, -seconds, -drain and -timeout must be positive, -warmup and -settle not negative")
	case c.publishes < 0:
		return c, errors.New("-publishes must not be negative")
	case c.dialConc < 1 || c.srcIPs < 1 || c.srcIPs > 250:
		return c, errors.New("-dial-concurrency must be at least 1, -src-ips 1 to 250")
	case c.liveInterval <= 0 || c.liveBefore <= 0 || c.hold <= 0:
		return c, errors.New("-live-interval, -live-before and -hold must be positive")
	case c.restarts < 0 || c.restartEvery <= 0 || (c.restarts > 0 && (c.mode != "fanout" || c.pidFile == "")):
		return c, errors.New("-restarts needs -mode fanout and -pidfile; -restart-every must be positive")
	case c.topic == "" || strings.ContainsAny(c.topic, " \t\r\n?&#"):
		return c, errors.New("-topic must be a word")
	}
	return c, nil
}
