//go:build linux

package httpd

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestValidFieldWords(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		b := make([]byte, rng.IntN(30))
		for i := range b {
			b[i] = byte(rng.IntN(256))
			if rng.IntN(3) == 0 {
				b[i] = "\r\n\x0c\x0e\t a"[rng.IntN(7)]
			}
		}
		want := !strings.ContainsAny(string(b), "\r\n")
		if validField(b) != want || validField(string(b)) != want {
			t.Fatalf("%q: %v", b, !want)
		}
	}
}
