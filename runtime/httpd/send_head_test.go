//go:build linux

package httpd

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/percore/percore/runtime/frame/http1"
)

// TestSendHeadModel: the loop's kept head of Send is, at every call,
// the head formatted afresh (the oracle), over seeded random sequences
// of heads, statuses, body lengths and seconds.
func TestSendHeadModel(t *testing.T) {
	heads := []*Head{
		NewHead(200, "Content-Type", "text/plain"),
		NewHead(200, "Content-Type", "application/json"),
		NewHead(0),
		NewHead(404, "Content-Type", "text/plain", "X-A", "b"),
	}
	for _, name := range []string{"", "-", "edge"} {
		s := New(Config{ServerName: name}, NewMux())
		var ls loopState
		rng := rand.New(rand.NewPCG(7, 25))
		now := time.Date(2026, 12, 3, 13, 0, 0, 0, time.UTC)
		for i := range 2000 {
			if rng.IntN(8) == 0 {
				now = now.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
			}
			h := heads[rng.IntN(len(heads))]
			status := []int{200, 200, 201, 404, 500}[rng.IntN(5)]
			n := []int{0, 13, 13, 27, 1 << 20}[rng.IntN(5)]
			got := string(ls.sendHead(s, now, h, status, n))
			var d http1.Date
			want := http1.AppendStatusLine(nil, status)
			if s.name != nil {
				want = append(append(append(want, "Server: "...), s.name...), "\r\n"...)
			}
			want = append(append(append(want, "Date: "...), d.Get(now)...), "\r\n"...)
			want = append(want, h.fields...)
			want = append(http1.AppendContentLength(want, int64(n)), "\r\n"...)
			if got != string(want) {
				t.Fatalf("server name %q, call %d (status %d, %d bytes, %v): %q, want %q", name, i, status, n, now, got, want)
			}
		}
	}
}
