//go:build linux

package httpd_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/httpd"
)

// A server with an inline handler and one that waits off the loop.
func Example() {
	var srv *httpd.Server
	mux := httpd.NewMux()
	mux.HandleFunc("GET /hello/{name}", func(w *httpd.Response, r *httpd.Request) {
		w.AddHeader("Content-Type", "text/plain")
		w.WriteString("hello, ")
		w.Write(r.PathValue("name"))
	})
	mux.HandleFunc("GET /slow", func(w *httpd.Response, r *httpd.Request) {
		srv.Go(w, func(ctx context.Context) func(*httpd.Response) {
			time.Sleep(time.Millisecond) // a blocking call, on a worker
			return func(w *httpd.Response) { w.WriteString("done") }
		})
	})
	srv = httpd.New(httpd.Config{}, mux)
	defer srv.Close()
	rt, err := percore.New(percore.Config{Addr: "127.0.0.1:0", Cores: []int{0}}, srv.Handler())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	for _, path := range []string{"/hello/gopher", "/slow"} {
		resp, err := http.Get("http://" + rt.Addr().String() + path)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body))
	}
	// Output:
	// 200 hello, gopher
	// 200 done
}

// A net/http handler served through the adapter.
func ExampleAdapt() {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "item %s", r.PathValue("id"))
	})
	srv := httpd.New(httpd.Config{}, httpd.Adapt(mux))
	defer srv.Close()
	rt, err := percore.New(percore.Config{Addr: "127.0.0.1:0", Cores: []int{0}}, srv.Handler())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	resp, err := http.Get("http://" + rt.Addr().String() + "/items/42")
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))
	// Output:
	// 200 item 42
}
