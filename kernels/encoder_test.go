package kernels_test

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gotrain/gotrain/kernels"
	"github.com/gotrain/gotrain/kernels/emu"
)

func int32Mem(v []int32) *emu.Mem {
	m := emu.Alloc(4 * len(v))
	copy(m.Int32s(), v)
	return m
}

func float32Mem(v []float32) *emu.Mem {
	m := emu.Alloc(4 * len(v))
	copy(m.Float32s(), v)
	return m
}

// gt_encoder_group must be a stable sort of the positions by token id,
// with each token's first position holding its run: checked against Go's
// stable sort on more positions than one block (a partial last tile), on
// a one-block grid so the block also walks its positions grid-stride.
func TestEncoderGroupIsAStableRanking(t *testing.T) {
	lib := emu.ForTest(t)
	r := rand.New(rand.NewPCG(7, 7))
	const n = 600
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(r.IntN(9)) - 1 // -1 is out of range but still grouped
	}
	inp, order, groups := int32Mem(ids), emu.Alloc(4*n), emu.Alloc(8*n)
	defer inp.Free()
	defer order.Free()
	defer groups.Free()
	if err := lib.Launch("gt_encoder_group", emu.Dim{X: 1}, emu.Dim{X: 256}, order, groups, inp, int32(n)); err != nil {
		t.Fatal(err)
	}

	want := make([]int32, n)
	for i := range want {
		want[i] = int32(i)
	}
	slices.SortStableFunc(want, func(a, b int32) int { return cmp.Compare(ids[a], ids[b]) })
	if got := order.Int32s(); !slices.Equal(got, want) {
		t.Fatalf("order = %v\nwant    %v", got, want)
	}
	count := map[int32]int32{}
	for _, id := range ids {
		count[id]++
	}
	g := groups.Int32s()
	seen := map[int32]bool{}
	for p, id := range ids {
		start, length := g[2*p], g[2*p+1]
		if length != count[id] {
			t.Fatalf("position %d (id %d): run length %d, want %d", p, id, length, count[id])
		}
		if seen[id] {
			if start != -1 {
				t.Fatalf("position %d repeats id %d but has start %d, want -1", p, id, start)
			}
			continue
		}
		seen[id] = true
		if start < 0 || want[start] != int32(p) {
			t.Fatalf("first position %d of id %d: start %d, which order maps to another position", p, id, start)
		}
	}
}

// Ids outside [0, V) must not touch memory outside wte: the forward pass
// writes a NaN row, the backward pass skips them, and every valid row
// gets the sum of its positions.
func TestEncoderOutOfRangeIDs(t *testing.T) {
	lib := emu.ForTest(t)
	const B, T, C, V = 1, 5, 3, 2
	ids := []int32{1, -1, 2, 1, 0}
	wteV := []float32{1, 2, 3, 4, 5, 6}
	wpeV := make([]float32, T*C)
	for i := range wpeV {
		wpeV[i] = float32(i) / 8
	}
	inp, wte, wpe, out := int32Mem(ids), float32Mem(wteV), float32Mem(wpeV), emu.Alloc(4*B*T*C)
	defer inp.Free()
	defer wte.Free()
	defer wpe.Free()
	defer out.Free()
	f32 := int32(kernels.F32)
	if err := lib.Launch("gt_encoder_forward", emu.Dim{X: 2}, emu.Dim{X: 32},
		out, f32, inp, wte, f32, wpe, f32, int32(B*T), int32(T), int32(C), int32(V)); err != nil {
		t.Fatal(err)
	}
	o := out.Float32s()
	for p, id := range ids {
		for c := 0; c < C; c++ {
			got := o[p*C+c]
			if id < 0 || id >= V {
				if !math.IsNaN(float64(got)) {
					t.Errorf("out[%d,%d] for id %d = %g, want NaN", p, c, id, got)
				}
				continue
			}
			if want := wteV[int(id)*C+c] + wpeV[p*C+c]; got != want {
				t.Errorf("out[%d,%d] = %g, want %g", p, c, got, want)
			}
		}
	}

	dout := make([]float32, B*T*C)
	for i := range dout {
		dout[i] = float32(i + 1)
	}
	dm, order, groups := float32Mem(dout), emu.Alloc(4*B*T), emu.Alloc(8*B*T)
	// Two rows past the V rows the kernel is told of: id 2 would land in
	// the first if it were not skipped.
	dwte := float32Mem(make([]float32, (V+2)*C))
	defer dm.Free()
	defer order.Free()
	defer groups.Free()
	defer dwte.Free()
	if err := lib.Launch("gt_encoder_group", emu.Dim{X: 1}, emu.Dim{X: 256}, order, groups, inp, int32(B*T)); err != nil {
		t.Fatal(err)
	}
	if err := lib.Launch("gt_encoder_backward_wte", emu.Dim{X: 3}, emu.Dim{X: 32},
		dwte, f32, dm, f32, inp, order, groups, int32(B*T), int32(C), int32(V)); err != nil {
		t.Fatal(err)
	}
	want := make([]float64, (V+2)*C)
	for p, id := range ids {
		if id >= 0 && id < V {
			for c := 0; c < C; c++ {
				want[int(id)*C+c] += float64(dout[p*C+c])
			}
		}
	}
	for i, got := range dwte.Float32s() {
		if float64(got) != want[i] {
			t.Errorf("dwte[%d] = %g, want %g", i, got, want[i])
		}
	}
}
