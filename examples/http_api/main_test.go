//go:build linux

package main

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/percore/percore/cpu"
	"github.com/percore/percore/internal/leakcheck"
	"github.com/percore/percore/internal/pctest"
	percore "github.com/percore/percore/runtime"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// TestAPI runs the API in both modes, on both backends, against a real
// redis-server.
func TestAPI(t *testing.T) {
	rs := pctest.StartRedis(t)
	for _, mode := range []string{"loop", "nethttp"} {
		t.Run(mode, func(t *testing.T) {
			pctest.EachBackend(t, func(t *testing.T, b percore.Backend) {
				cores, err := cpu.Cores()
				if err != nil {
					t.Fatal(err)
				}
				s, err := start(config{Config: percore.Config{Addr: "127.0.0.1:0", Backend: b, Cores: cores[:1]},
					redis: rs.Addr(), mode: mode, logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(s.close)
				base := "http://" + s.rt.Addr().String()
				tr := &http.Transport{}
				t.Cleanup(tr.CloseIdleConnections)
				cl := &http.Client{Transport: tr, Timeout: 10 * time.Second}
				id := mode + "-" + b.String()
				do := func(method, path, body string) (int, string, http.Header) {
					t.Helper()
					var rd io.Reader
					if body != "" {
						rd = strings.NewReader(body)
					}
					req, _ := http.NewRequest(method, base+path, rd)
					resp, err := cl.Do(req)
					if err != nil {
						t.Fatalf("%s %s: %v", method, path, err)
					}
					got, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					return resp.StatusCode, string(got), resp.Header
				}
				if st, _, _ := do("GET", "/users/"+id, ""); st != 404 {
					t.Fatalf("GET before POST: %d", st)
				}
				if st, got, _ := do("POST", "/users", `{"id":"`+id+`","name":"ada"}`); st != 201 {
					t.Fatalf("POST: %d %q", st, got)
				}
				st, got, h := do("GET", "/users/"+id, "")
				if st != 200 || got != `{"id":"`+id+`","name":"ada"}` || h.Get("Content-Type") != "application/json" {
					t.Fatalf("GET: %d %q %v", st, got, h)
				}
				if st, _, _ := do("POST", "/users", `{"id":""}`); st != 400 {
					t.Fatalf("POST without a name: %d", st)
				}
				if st, _, _ := do("DELETE", "/users/"+id, ""); st != 405 {
					t.Fatalf("DELETE: %d", st)
				}
				if mode == "nethttp" {
					if st, got, _ := do("GET", "/debug/pprof/", ""); st != 200 || !strings.Contains(got, "goroutine") {
						t.Fatalf("pprof: %d %.100q", st, got)
					}
				}
			})
		})
	}
}
