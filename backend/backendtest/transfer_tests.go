package backendtest

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/gotrain/gotrain/backend"
)

func testTransfer(t *testing.T, nb func(*testing.T) backend.Backend) {
	h := newHarness(t, nb, 4000)
	be := h.be
	if err := be.Sync(); err != nil {
		t.Fatalf("Sync on an idle backend: %v", err)
	}

	// Round trip of raw bytes through every pool and dtype.
	for _, p := range backend.Pools() {
		for _, dt := range []backend.DType{backend.F32, backend.BF16, backend.F16, backend.I32, backend.U16} {
			const n = 1001
			b, err := be.Alloc(p, backend.Workspace, dt, n)
			if err != nil {
				t.Fatal(err)
			}
			src := make([]byte, n*dt.Size())
			for i := range src {
				src[i] = byte(h.rng.Uint32())
			}
			if err := be.Upload(b, src); err != nil {
				t.Fatalf("Upload %s %s: %v", p, dt, err)
			}
			dst := make([]byte, len(src))
			if err := be.Download(dst, b); err != nil {
				t.Fatalf("Download %s %s: %v", p, dt, err)
			}
			if !bytes.Equal(src, dst) {
				t.Errorf("%s %s: bytes changed in a round trip", p, dt)
			}
			be.Free(b)
		}
	}

	// Slice views read and write only their own elements.
	whole := h.alloc(backend.F32, 10)
	part := make([]byte, 12)
	for i := 0; i < 3; i++ {
		binary.LittleEndian.PutUint32(part[4*i:], math.Float32bits(float32(i+1)))
	}
	if err := be.Upload(whole.Slice(4, 3), part); err != nil {
		t.Fatal(err)
	}
	got := h.get(whole)
	want := []float64{0, 0, 0, 0, 1, 2, 3, 0, 0, 0}
	check(t, "upload into a slice", got, want, tol{})
	sub := make([]byte, 8)
	if err := be.Download(sub, whole.Slice(5, 2)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sub, part[4:12]) {
		t.Errorf("download of a slice = %v, want %v", sub, part[4:12])
	}
	if err := be.Upload(whole.Slice(8, 2), part); err == nil {
		t.Errorf("Upload of 12 bytes into an 8-byte view succeeded")
	}
	if err := be.Download(make([]byte, 7), whole.Slice(8, 2)); err == nil {
		t.Errorf("Download of an 8-byte view into 7 bytes succeeded")
	}

	// Zero clears a view and nothing else.
	filled, vals := h.put(backend.BF16, h.normal(50, 1))
	be.Zero(filled.Slice(3, 40))
	for i := 3; i < 43; i++ {
		vals[i] = 0
	}
	check(t, "Zero of a slice", h.get(filled), vals, tol{})

	// Copy between pools and within a dtype, including integers.
	ints := []int32{-5, 0, 7, math.MaxInt32, math.MinInt32}
	a := h.putInts(ints)
	b, err := be.Alloc(backend.Host, backend.Comm, backend.I32, len(ints))
	if err != nil {
		t.Fatal(err)
	}
	defer be.Free(b)
	be.Copy(b, a)
	raw := make([]byte, 4*len(ints))
	if err := be.Download(raw, b); err != nil {
		t.Fatal(err)
	}
	for i, x := range ints {
		if g := int32(binary.LittleEndian.Uint32(raw[4*i:])); g != x {
			t.Errorf("Copy I32 [%d] = %d, want %d", i, g, x)
		}
	}
	src, srcV := h.put(backend.F32, h.normal(20, 1))
	dst := h.alloc(backend.F32, 30)
	be.Copy(dst.Slice(5, 20), src)
	wantDst := make([]float64, 30)
	copy(wantDst[5:], srcV)
	check(t, "Copy into a slice", h.get(dst), wantDst, tol{})
}
