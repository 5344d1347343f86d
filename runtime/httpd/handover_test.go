package httpd_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/httpd"
)

// whoServer answers every request with its name.
func whoServer(name string) *httpd.Server {
	return httpd.New(httpd.Config{}, httpd.HandlerFunc(func(w *httpd.Response, r *httpd.Request) {
		w.Write([]byte(name))
	}))
}

// A restart's hand-over: an idle keep-alive connection moves to the new
// process at once; one with half a request head waits, is answered by the
// old process once the head is whole (keep-alive, not Connection: close),
// and then moves. The next request of each is answered by the new process.
func TestHandoverKeepAlive(t *testing.T) {
	pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
		old := pctest.Start(t, percore.Config{Backend: b}, whoServer("A").Handler())
		idle, partial := pctest.Dial(t, old.Addr().String()), pctest.Dial(t, old.Addr().String())
		ri, rp := bufio.NewReader(idle), bufio.NewReader(partial)
		get := func(c io.Writer, rd *bufio.Reader, want string) {
			t.Helper()
			if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			expectBody(t, rd, want)
		}
		get(idle, ri, "A")
		get(partial, rp, "A")

		files, err := old.ListenerFiles()
		if err != nil {
			t.Fatal(err)
		}
		next := pctest.Start(t, percore.Config{Backend: b, Inherited: files}, whoServer("B").Handler())
		for _, f := range files {
			f.Close()
		}
		oldEnd, nextEnd, err := percore.HandoverSockets()
		if err != nil {
			t.Fatal(err)
		}
		defer oldEnd.Close()
		defer nextEnd.Close()
		if err := next.Adopt(nextEnd); err != nil {
			t.Fatal(err)
		}
		partial.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n"))
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			done <- old.HandOver(ctx, oldEnd)
		}()
		pctest.WaitFor(t, "the idle connection handed over", func() bool { return old.Stats().HandedOff == 1 })
		partial.Write([]byte("\r\n"))
		expectBody(t, rp, "A")
		if err := pctest.Recv(t, done, "the hand-over"); err != nil {
			t.Fatal(err)
		}
		get(idle, ri, "B")
		get(partial, rp, "B")
		if st := old.Stats(); st.HandedOff != 2 || st.HandoffDeclined != 0 {
			t.Fatalf("handed %d, declined %d", st.HandedOff, st.HandoffDeclined)
		}
	})
}

// expectBody reads one response and checks its body, and that it keeps the
// connection.
func expectBody(t *testing.T, rd *bufio.Reader, body string) {
	t.Helper()
	resp, err := http.ReadResponse(rd, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	if err != nil || string(got) != body || resp.Close {
		t.Fatalf("response %q, %v, close %v; want %q kept alive", got, err, resp.Close, body)
	}
}
