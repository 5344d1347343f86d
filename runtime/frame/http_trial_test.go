package frame_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/frame"
)

// The issue 14 trial's plaintext HTTP/1.1 server, on the new API: a split
// function that cuts the stream into request heads (GET only: no bodies),
// and a reply built in place. The trial kept its own tail of a partial
// head; here frame.Split does. (The strict HTTP codec is issue 18's.)

var errNotGet = errors.New("only GET without a body")

// scanHead splits at the end of a request head.
func scanHead(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.Index(data, []byte("\r\n\r\n")); i >= 0 {
		if !bytes.HasPrefix(data, []byte("GET ")) {
			return 0, nil, errNotGet
		}
		return i + 4, data[:i+4], nil
	}
	return 0, nil, nil
}

var plaintext = []byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!")

type hello struct{}

func (hello) OnFrame(c *percore.Conn, head []byte) {
	room := c.Reserve(len(plaintext))
	c.Commit(copy(room, plaintext))
}

func TestHTTPTrialOnSplit(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		rt := serve(t, b, frame.Split(scanHead, hello{}, frame.SplitConfig{MaxBuffered: 8 << 10}))
		url := "http://" + rt.Addr().String() + "/plaintext"

		// Go's client, keep-alive: every request on one connection.
		tr := &http.Transport{MaxIdleConnsPerHost: 1}
		t.Cleanup(tr.CloseIdleConnections)
		client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		for i := range 20 {
			resp, err := client.Get(url)
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || string(body) != "Hello, World!" {
				t.Fatalf("request %d: %d %q %v", i, resp.StatusCode, body, err)
			}
		}
		if st := rt.Stats(); st.Accepts != 1 {
			t.Errorf("%d connections for 20 keep-alive requests, want 1", st.Accepts)
		}

		// Pipelined, each head cut across writes: 16 replies in order.
		c := pctest.Dial(t, rt.Addr().String())
		req := []byte("GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n")
		for range 16 {
			for _, piece := range [][]byte{req[:7], req[7:]} {
				if _, err := c.Write(piece); err != nil {
					t.Fatal(err)
				}
			}
		}
		r := bufio.NewReader(c)
		for i := range 16 {
			resp, err := http.ReadResponse(r, nil)
			if err != nil {
				t.Fatalf("pipelined reply %d: %v", i, err)
			}
			body, _ := io.ReadAll(resp.Body)
			if string(body) != "Hello, World!" {
				t.Fatalf("pipelined reply %d: %q", i, body)
			}
		}
	})
}
