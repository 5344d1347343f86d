package runtime

import "testing"

// An incremental ring holds a quarter of the plain ring's bytes in buffers
// of IncrementalBufferSize (or BufferSize, if larger), a power of two of
// them, at least two.
func TestIncGeometry(t *testing.T) {
	for _, tc := range []struct{ count, size, wantCount, wantSize int }{
		{DefaultBufferCount, DefaultBufferSize, 32, IncrementalBufferSize},
		{2048, 16 << 10, 128, IncrementalBufferSize},
		{512, 1 << 20, 128, 1 << 20},
		{8, 16, 2, IncrementalBufferSize},
		{512, 20000, 32, IncrementalBufferSize}, // 39 rounded down
	} {
		n, size := incGeometry(tc.count, tc.size)
		if n != tc.wantCount || size != tc.wantSize {
			t.Errorf("incGeometry(%d, %d) = %d, %d; want %d, %d", tc.count, tc.size, n, size, tc.wantCount, tc.wantSize)
		}
	}
}
