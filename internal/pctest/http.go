//go:build linux

package pctest

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// HTTPGet fetches url within 10 seconds and returns the body of a 200
// answer, failing the test otherwise (a side port's /metrics, say).
func HTTPGet(t testing.TB, url string) string {
	t.Helper()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %v", url, resp.Status, err)
	}
	return string(body)
}

// CheckPlaintext runs a TechEmpower-style plaintext server and checks it:
// four pipelined keep-alive GET /plaintext requests on one connection are
// each answered 200 "Hello, World!" with a Date header, and the server
// returns nil within 20 seconds of its context being cancelled. serve runs
// the server until ctx is done, calling ready with its address once it
// listens.
func CheckPlaintext(t testing.TB, serve func(ctx context.Context, ready func(addr string)) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- serve(ctx, func(a string) { ready <- a }) }()
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

// Curl runs the curl command with args (after -sS --max-time 20), within
// 30 seconds, and returns what it printed on stdout and stderr (curl -v
// writes its connection notes to stderr). It skips the test when curl is
// not installed and fails it when curl fails.
func Curl(t testing.TB, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed (apt-get install -y curl; .ci/run and scripts/ensure-tools.sh install it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, append([]string{"-sS", "--max-time", "20"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("curl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
