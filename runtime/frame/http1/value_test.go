package http1

import "testing"

// TestValidValue compares the eight-at-a-time check with the table, for
// every byte at every position of a word and after it.
func TestValidValue(t *testing.T) {
	for c := range 256 {
		for pos := range 11 {
			v := []byte("abcdefghijk")
			v[pos] = byte(c)
			want := fieldValue[c]
			if got := validValue(v); got != want {
				t.Fatalf("byte %#x at %d: %v, want %v", c, pos, got, want)
			}
		}
	}
	if !validValue([]byte("\x80\xff\tok \xfe\x81\x90\xa0")) {
		t.Fatal("obs-text and tabs rejected")
	}
}
