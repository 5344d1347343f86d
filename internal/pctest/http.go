//go:build linux

package pctest

import (
	"io"
	"net/http"
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
