package kernels_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/backendtest"
	"github.com/gotrain/gotrain/kernels"
	"github.com/gotrain/gotrain/kernels/emu"
)

// On a two-block grid (blocks walk rows grid-stride) the cross-entropy
// kernels match the float64 reference for valid targets, with the row
// maximum in the padded columns' way; a target outside [0, V) gives a NaN
// loss and NaN real-column gradients for its row only, padded columns
// still 0, and no other row is disturbed.
func TestCrossEntropyKernelsRowsAndBadTargets(t *testing.T) {
	lib := emu.ForTest(t)
	r := rand.New(rand.NewPCG(5, 8))
	const N, V, Vp = 7, 300, 320
	x := normalF32(r, N*Vp)
	for i := range x {
		x[i] *= 3
	}
	for j := V; j < Vp; j++ {
		x[2*Vp+j] = 500 // padded columns never enter the softmax
	}
	tg := make([]int32, N)
	for i := range tg {
		tg[i] = int32(r.IntN(V))
	}
	tg[3], tg[5] = -1, V // out of range
	good := func(row int) bool { return row != 3 && row != 5 }

	want, wantP := make([]float64, N), make([]float64, N*Vp)
	safe := append([]int32(nil), tg...)
	safe[3], safe[5] = 0, 0
	backendtest.RefCrossEntropyForward(want, wantP, x, safe, N, V, Vp)
	const dloss = 0.125
	wantD := make([]float64, N*Vp)
	backendtest.RefCrossEntropyBackward(wantD, wantP, safe, dloss, N, V, Vp)

	logits, targets := f32MemOf(x), emu.Alloc(4*N)
	copy(targets.Int32s(), tg)
	losses, probs, dlogits := emu.Alloc(4*N), emu.Alloc(4*N*Vp), emu.Alloc(4*N*Vp)
	defer func() {
		for _, m := range []*emu.Mem{logits, targets, losses, probs, dlogits} {
			m.Free()
		}
	}()
	f32 := int32(kernels.F32)
	grid, block := emu.Dim{X: 2}, emu.Dim{X: 256}
	if err := lib.Launch("gt_crossentropy_forward", grid, block,
		losses, probs, logits, f32, targets, int32(N), int32(V), int32(Vp)); err != nil {
		t.Fatal(err)
	}
	if err := lib.Launch("gt_crossentropy_backward", grid, block,
		dlogits, f32, probs, targets, float32(dloss), int32(N), int32(V), int32(Vp)); err != nil {
		t.Fatal(err)
	}
	l, p, d := losses.Float32s(), probs.Float32s(), dlogits.Float32s()
	for row := 0; row < N; row++ {
		pr, dr := p[row*Vp:(row+1)*Vp], d[row*Vp:(row+1)*Vp]
		closeTo(t, "probs", pr, wantP[row*Vp:(row+1)*Vp], 1e-5)
		for j := V; j < Vp; j++ {
			if dr[j] != 0 {
				t.Errorf("row %d: dlogits[%d] = %g in a padded column", row, j, dr[j])
			}
		}
		if !good(row) {
			if !math.IsNaN(float64(l[row])) {
				t.Errorf("row %d with target %d: loss %g, want NaN", row, tg[row], l[row])
			}
			for j := 0; j < V; j++ {
				if !math.IsNaN(float64(dr[j])) {
					t.Fatalf("row %d with target %d: dlogits[%d] = %g, want NaN", row, tg[row], j, dr[j])
				}
			}
			continue
		}
		if math.Abs(float64(l[row])-want[row]) > 1e-5*want[row] {
			t.Errorf("row %d: loss %g, want %g", row, l[row], want[row])
		}
		closeTo(t, "dlogits", dr, wantD[row*Vp:(row+1)*Vp], 1e-5)
	}
}

// The fused classifier on a two-block grid, in place over bf16 logits:
// losses match the float64 reference on the bf16 values, dlogits match
// (softmax − onehot)·dloss to bf16 rounding with padded columns 0, a bad
// target poisons only its row (NaN loss and real columns), and
// write_dlogits = 0 leaves the logits' bits as they were.
func TestFusedClassifierKernelInPlaceBF16(t *testing.T) {
	lib := emu.ForTest(t)
	r := rand.New(rand.NewPCG(9, 4))
	const N, V, Vp = 5, 300, 320
	x := normalF32(r, N*Vp)
	raw := emu.Alloc(2 * N * Vp)
	bits := unsafe.Slice((*uint16)(unsafe.Pointer(&raw.Bytes()[0])), N*Vp)
	for i := range x {
		x[i] *= 3
		if i%Vp >= V {
			x[i] = 500 // padded columns never enter the softmax
		}
		bits[i] = backend.BF16FromF32(float32(x[i]))
		x[i] = float64(backend.F32FromBF16(bits[i]))
	}
	orig := append([]uint16(nil), bits...)
	tg := []int32{3, V - 1, -1, 0, 17}
	safe := append([]int32(nil), tg...)
	safe[2] = 0
	want, wantP := make([]float64, N), make([]float64, N*Vp)
	backendtest.RefCrossEntropyForward(want, wantP, x, safe, N, V, Vp)
	const dloss = 0.25
	wantD := make([]float64, N*Vp)
	backendtest.RefCrossEntropyBackward(wantD, wantP, safe, dloss, N, V, Vp)

	targets, losses := emu.Alloc(4*N), emu.Alloc(4*N)
	defer func() {
		for _, m := range []*emu.Mem{raw, targets, losses} {
			m.Free()
		}
	}()
	copy(targets.Int32s(), tg)
	bf16 := int32(kernels.BF16)
	grid, block := emu.Dim{X: 2}, emu.Dim{X: 256}
	for _, write := range []int32{0, 1} {
		if err := lib.Launch("gt_fused_classifier", grid, block,
			losses, raw, bf16, targets, float32(dloss), write, int32(N), int32(V), int32(Vp)); err != nil {
			t.Fatal(err)
		}
		l := losses.Float32s()
		for row := 0; row < N; row++ {
			if row == 2 {
				if !math.IsNaN(float64(l[row])) {
					t.Errorf("row 2 with target -1: loss %g, want NaN", l[row])
				}
				continue
			}
			if math.Abs(float64(l[row])-want[row]) > 1e-5*want[row] {
				t.Errorf("write %d row %d: loss %g, want %g", write, row, l[row], want[row])
			}
		}
		if write == 0 {
			for i := range bits {
				if bits[i] != orig[i] {
					t.Fatalf("write_dlogits 0 changed logit %d", i)
				}
			}
		}
	}
	for row := 0; row < N; row++ {
		for j := 0; j < Vp; j++ {
			got := float64(backend.F32FromBF16(bits[row*Vp+j]))
			switch w := wantD[row*Vp+j]; {
			case j >= V:
				if got != 0 {
					t.Errorf("row %d: dlogits[%d] = %g in a padded column", row, j, got)
				}
			case row == 2:
				if !math.IsNaN(got) {
					t.Fatalf("row 2: dlogits[%d] = %g, want NaN", j, got)
				}
			case math.Abs(got-w) > 1e-6+math.Abs(w)/128:
				t.Errorf("row %d: dlogits[%d] = %g, want %g (bf16)", row, j, got, w)
			}
		}
	}
}
