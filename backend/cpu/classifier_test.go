package cpu_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
)

// TestFusedClassifierBitIdentical: in fp32, FusedClassifier's losses and
// dlogits equal CrossEntropyForward then CrossEntropyBackward bit for bit
// (it scales the same exps by the same 1/Σ and dloss, each product
// rounded); on bf16 logits they equal the fp32 op on the widened logits,
// the dlogits then rounded to bf16, padding columns zero in both.
func TestFusedClassifierBitIdentical(t *testing.T) {
	be := cpu.New(cpu.Options{Gemm: blas.NewGo(2), Threads: 2})
	rng := rand.New(rand.NewPCG(51, 52))
	const N, V, Vp, dloss = 5, 1003, 1024, float32(1.0 / 15)
	alloc := func(dt backend.DType, n int) backend.Buffer {
		b, err := be.Alloc(backend.Device, backend.Activations, dt, n)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	put := func(b backend.Buffer, v []float32) {
		if err := backend.WriteF32(be, b, v); err != nil {
			t.Fatal(err)
		}
	}
	get := func(b backend.Buffer) []float32 {
		v, err := backend.ReadF32(be, b)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	x := make([]float32, N*Vp)
	for i := range x {
		// bf16-exact, so the fp32 and bf16 runs see the same logits.
		x[i] = backend.F32FromBF16(backend.BF16FromF32(float32(rng.NormFloat64() * 3)))
	}
	tg := make([]float32, N)
	for i := range tg {
		tg[i] = float32(rng.IntN(V))
	}
	targets := alloc(backend.I32, N)
	put(targets, tg)

	logits, probs := alloc(backend.F32, N*Vp), alloc(backend.F32, N*Vp)
	lossCE := alloc(backend.F32, N)
	put(logits, x)
	be.CrossEntropyForward(lossCE, probs, logits, targets, N, V, Vp)
	be.CrossEntropyBackward(probs, probs, targets, dloss, N, V, Vp)
	wantL, wantD := get(lossCE), get(probs)

	lossF := alloc(backend.F32, N)
	be.FusedClassifier(lossF, logits, targets, dloss, N, V, Vp)
	same := func(what string, got, want []float32, round bool) {
		t.Helper()
		for i := range want {
			w := want[i]
			if round {
				w = backend.F32FromBF16(backend.BF16FromF32(w))
			}
			if math.Float32bits(got[i]) != math.Float32bits(w) {
				t.Fatalf("%s[%d] = %g, want %g", what, i, got[i], w)
			}
		}
	}
	same("fp32 losses", get(lossF), wantL, false)
	gotD := get(logits)
	for r := range N {
		same("fp32 dlogits", gotD[r*Vp:r*Vp+V], wantD[r*Vp:r*Vp+V], false)
		same("fp32 padding", gotD[r*Vp+V:(r+1)*Vp], make([]float32, Vp-V), false)
	}

	l16 := alloc(backend.BF16, N*Vp)
	put(l16, x)
	lossB := alloc(backend.F32, N)
	be.FusedClassifier(lossB, l16, targets, dloss, N, V, Vp)
	same("bf16 losses", get(lossB), wantL, false)
	got16 := get(l16)
	for r := range N {
		same("bf16 dlogits", got16[r*Vp:r*Vp+V], wantD[r*Vp:r*Vp+V], true)
		same("bf16 padding", got16[r*Vp+V:(r+1)*Vp], make([]float32, Vp-V), false)
	}
}
