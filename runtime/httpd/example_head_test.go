//go:build linux

package httpd_test

import (
	"fmt"
	"io"
	"net/http"

	percore "github.com/percore/percore/runtime"
	"github.com/percore/percore/runtime/httpd"
)

// The fast way to answer: a Head made once, at registration, and the
// whole answer written in one pass.
func ExampleResponse_Send() {
	mux := httpd.NewMux()
	plain := httpd.NewHead(200, "Content-Type", "text/plain")
	mux.HandleFunc("GET /plaintext", func(w *httpd.Response, r *httpd.Request) {
		w.SendString(plain, "Hello, World!")
	})
	srv := httpd.New(httpd.Config{}, mux)
	defer srv.Close()
	rt, err := percore.New(percore.Config{Addr: "127.0.0.1:0", Cores: oneCore(), Logger: quiet}, srv.Handler())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer rt.Close()
	resp, err := http.Get("http://" + rt.Addr().String() + "/plaintext")
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("Content-Type"), resp.ContentLength, string(body))
	// Output:
	// 200 text/plain 13 Hello, World!
}
