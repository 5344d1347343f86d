package spare

import "testing"

// TestPop checks that Pop takes from the end, clears the place it took
// from, and returns nil for an empty list.
func TestPop(t *testing.T) {
	a, b := new(int), new(int)
	list := []*int{a, b}
	full := list[:2:2]
	if got := Pop(&list); got != b || len(list) != 1 || full[1] != nil {
		t.Fatalf("Pop = %p, list %v, its old place %p; want %p, one left, nil", got, list, full[1], b)
	}
	if got := Pop(&list); got != a || len(list) != 0 {
		t.Fatalf("Pop = %p, %d left; want %p, none", got, len(list), a)
	}
	if got := Pop(&list); got != nil {
		t.Fatalf("Pop of an empty list = %p; want nil", got)
	}
}
