package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// TestPlaintext: keep-alive and pipelined plaintext requests are answered,
// and the server stops when asked.
func TestPlaintext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, "127.0.0.1:0", 1, func(a string) { ready <- a }) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write([]byte(strings.Repeat("GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n", 4))); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(c)
	for i := range 4 {
		resp, err := http.ReadResponse(rd, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(body) != "Hello, World!" || resp.Header.Get("Date") == "" {
			t.Fatalf("response %d: %d %q %v", i, resp.StatusCode, body, resp.Header)
		}
	}
	c.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the server did not stop")
	}
}
