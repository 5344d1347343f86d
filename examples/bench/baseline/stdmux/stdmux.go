// Package stdmux is the http.ServeMux of the net/http rows of the HTTP
// benchmark (scripts/bench-http.sh): served by net/http itself
// (baseline/nethttp) and by percore's net/http adapter (baseline/httpd
// -serve adapt), so that the two rows run the same handlers.
package stdmux

import (
	"encoding/json"
	"net/http"
	"time"
)

var hello = []byte("Hello, World!")

// SleepFor is how long GET /sleep blocks its goroutine: the blocking
// handler of the benchmark.
const SleepFor = 2 * time.Millisecond

// Mux returns the handlers: GET /plaintext, GET /json (encoding/json for
// every request) and GET /sleep (time.Sleep(SleepFor), then "slept").
func Mux(server string) *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("GET /plaintext", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Server", server)
		w.Write(hello)
	})
	m.HandleFunc("GET /json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Server", server)
		json.NewEncoder(w).Encode(struct {
			Message string `json:"message"`
		}{"Hello, World!"})
	})
	m.HandleFunc("GET /sleep", func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(SleepFor)
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("slept"))
	})
	return m
}
