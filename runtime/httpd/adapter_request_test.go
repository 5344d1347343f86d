//go:build linux

package httpd

import (
	"math/rand/v2"
	"net/url"
	"reflect"
	"testing"
)

// TestParseTargetAsURL: where parseTarget takes a target, it gives what
// url.ParseRequestURI gives; seeded random targets over the bytes that
// matter (escapes, '?', '#', reserved and control bytes).
func TestParseTargetAsURL(t *testing.T) {
	fixed := []string{"/", "/plaintext", "/a/b?x=1&y=2", "/a?", "/a%20b", "/a b", "/a#f", "/a?q#f", "/!x", "/a;b=c", "/@:$&+,=", "/?x=%zz", "*", "http://h/p?q"}
	const alphabet = "ab/?#%20!;=&+~._-:@*()' \x01\x7f\xc3"
	rng := rand.New(rand.NewPCG(25, 56))
	for range 5000 {
		b := []byte{'/'}
		for range rng.IntN(12) {
			b = append(b, alphabet[rng.IntN(len(alphabet))])
		}
		fixed = append(fixed, string(b))
	}
	took := 0
	for _, target := range fixed {
		var u url.URL
		if !parseTarget(target, &u) {
			continue
		}
		took++
		want, err := url.ParseRequestURI(target)
		if err != nil {
			t.Fatalf("%q: taken, but url.ParseRequestURI says %v", target, err)
		}
		if !reflect.DeepEqual(&u, want) {
			t.Fatalf("%q: %#v, want %#v", target, u, *want)
		}
	}
	if took < 100 {
		t.Fatalf("only %d targets taken", took)
	}
}
