//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/percore/percore/internal/pctest"
)

// plaintextHandler answers every request with "Hello, World!", except
// that response number bad (from 1; 0: none) of each connection says
// "Hello, Wurld!". It answers only when want requests are outstanding
// (pipelined) and records the most it ever saw outstanding.
func plaintextHandler(bad, want int, maxSeen *atomic.Int64) func(net.Conn) {
	return func(c net.Conn) {
		rd := bufio.NewReader(c)
		answered := 0
		var pending int
		for {
			req, err := http.ReadRequest(rd)
			if err != nil {
				return
			}
			req.Body.Close()
			pending++
			if rd.Buffered() > 0 && pending < want {
				continue
			}
			if int64(pending) > maxSeen.Load() {
				maxSeen.Store(int64(pending))
			}
			if pending < want {
				continue
			}
			var out bytes.Buffer
			for ; pending > 0; pending-- {
				answered++
				body := "Hello, World!"
				if answered == bad {
					body = "Hello, Wurld!"
				}
				out.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\n" + body)
			}
			if _, err := c.Write(out.Bytes()); err != nil {
				return
			}
		}
	}
}

func TestHTTPMode(t *testing.T) {
	for _, engine := range []string{"percore", "percore-epoll"} {
		t.Run(engine, func(t *testing.T) {
			if engine == "percore" {
				pctest.NeedURing(t)
			}
			var maxSeen atomic.Int64
			addr := pctest.Serve(t, plaintextHandler(0, 4, &maxSeen)).Addr()
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{"-addr", addr, "-engine", engine, "-conns", "3", "-pipeline", "4",
				"-http", "/plaintext", "-http-body", "Hello, World!", "-warmup", "0", "-seconds", "0.3", "-json"}, &stdout, &stderr)
			if code != 0 {
				t.Fatalf("exit status %d; stderr:\n%s", code, stderr.String())
			}
			var res Result
			if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
				t.Fatal(err)
			}
			if res.Requests == 0 || res.Mismatches != 0 || res.Errors != 0 {
				t.Fatalf("%s", stdout.String())
			}
			if got := maxSeen.Load(); got != 4 {
				t.Errorf("at most %d requests outstanding, want 4", got)
			}
		})
	}
}

func TestHTTPModeDetectsAWrongBody(t *testing.T) {
	var maxSeen atomic.Int64
	addr := pctest.Serve(t, plaintextHandler(3, 1, &maxSeen)).Addr()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-addr", addr, "-engine", "percore-epoll", "-conns", "2",
		"-http", "/plaintext", "-http-body", "Hello, World!", "-warmup", "0", "-seconds", "0.3", "-json"}, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("exit status %d, want 1; stderr:\n%s", code, stderr.String())
	}
	var res Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil || res.Mismatches == 0 {
		t.Fatalf("%v %s", err, stdout.String())
	}
}

func TestHTTPModeNeedsPercore(t *testing.T) {
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"-engine", "std", "-http", "/"}, &bytes.Buffer{}, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "percore engines only") {
		t.Fatalf("%d %s", code, stderr.String())
	}
}
