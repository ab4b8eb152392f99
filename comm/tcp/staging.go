package tcp

import "unsafe"

// staging is the Comm's host memory between Buffers and the wire, grown to
// the largest message seen and reused by every later call. raw holds a
// message in its own dtype; wide holds the fp32 copy a 16-bit reduction
// works on.
type staging struct {
	raw  []uint64 // 8-byte words, so every element view is aligned
	wide []float32
}

func (s *staging) bytes(n int) []byte {
	if words := (n + 7) / 8; len(s.raw) < words {
		s.raw = make([]uint64, words)
	}
	return wordsAsBytes(s.raw)[:n]
}

func (s *staging) floats(n int) []float32 {
	if len(s.wide) < n {
		s.wide = make([]float32, n)
	}
	return s.wide[:n]
}

// alignedBytes returns n zeroed bytes whose start is 8-byte aligned.
func alignedBytes(n int) []byte {
	return wordsAsBytes(make([]uint64, (n+7)/8))[:n]
}

func wordsAsBytes(w []uint64) []byte {
	if len(w) == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 8*len(w))
}
