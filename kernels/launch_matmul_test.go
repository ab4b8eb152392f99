package kernels

import "testing"

// The column-sum chunking must cover every row exactly once with at most
// colMaxChunks chunks (the scratch bound) of at least colMinRows rows.
func TestColumnChunksCoverRows(t *testing.T) {
	for _, N := range []int{1, 2, 31, 32, 33, 1000, 16384, 16385, 100003, 1 << 22} {
		chunks, rows := colChunks(N)
		if chunks < 1 || chunks > colMaxChunks || rows < colMinRows {
			t.Errorf("N=%d: %d chunks of %d rows, want 1..%d chunks of ≥ %d rows", N, chunks, rows, colMaxChunks, colMinRows)
		}
		if (chunks-1)*rows >= N || chunks*rows < N {
			t.Errorf("N=%d: %d chunks of %d rows do not cover the rows exactly", N, chunks, rows)
		}
		if got := MatmulDbiasPartialLen(N, 7); got != 7*chunks {
			t.Errorf("N=%d: MatmulDbiasPartialLen = %d, want %d", N, got, 7*chunks)
		}
		if got := LayerNormPartialLen(N, 7); got != 14*chunks {
			t.Errorf("N=%d: LayerNormPartialLen = %d, want %d", N, got, 14*chunks)
		}
	}
	if chunks, _ := colChunks(0); chunks != 0 || MatmulDbiasPartialLen(0, 5) != 0 {
		t.Errorf("N=0 needs no chunks, got %d", chunks)
	}
}
