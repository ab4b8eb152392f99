package kernels_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gotrain/gotrain/backend/backendtest"
	"github.com/gotrain/gotrain/kernels"
	"github.com/gotrain/gotrain/kernels/emu"
)

// f32MemOf copies float64 test data, already representable in fp32, into
// emulator memory.
func f32MemOf(v []float64) *emu.Mem {
	m := emu.Alloc(4 * len(v))
	f := m.Float32s()
	for i, x := range v {
		f[i] = float32(x)
	}
	return m
}

// normalF32 is n N(0,1) values rounded to fp32.
func normalF32(r *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(float32(r.NormFloat64()))
	}
	return v
}

// closeTo requires |got − want| ≤ rel·(rms(want) + |want|) everywhere.
func closeTo(t *testing.T, name string, got []float32, want []float64, rel float64) {
	t.Helper()
	var ss float64
	for _, w := range want {
		ss += w * w
	}
	rms := math.Sqrt(ss / float64(max(len(want), 1)))
	bad := 0
	for i, w := range want {
		g := float64(got[i])
		if !(math.Abs(g-w) <= rel*(rms+math.Abs(w))) {
			if bad < 5 {
				t.Errorf("%s[%d] = %g, want %g", name, i, g, w)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements off", name, bad, len(want))
	}
}

// The attention kernels walk their rows grid-stride: on grids of one and
// three blocks (far fewer warps than rows, the last block partly idle) they
// must still give the float64 reference's results, with a head size of 5,
// grouped key/value heads (three query heads a group) and a sequence
// longer than a warp.
func TestAttentionKernelsWalkRowsGridStride(t *testing.T) {
	lib := emu.ForTest(t)
	r := rand.New(rand.NewPCG(11, 3))
	const B, T, NH, KV, HD = 2, 37, 6, 2, 5
	nqkv, nout := B*T*(NH+2*KV)*HD, B*T*NH*HD
	qkvV, doutV := normalF32(r, nqkv), normalF32(r, nout)
	wantOut, wantLse := make([]float64, nout), make([]float64, B*NH*T)
	backendtest.RefAttentionForward(wantOut, wantLse, qkvV, B, T, NH, KV, HD)
	scale := float32(1 / math.Sqrt(HD))
	f32 := int32(kernels.F32)
	dims := []any{int32(B), int32(T), int32(NH), int32(KV), int32(HD), scale}

	for _, grid := range []uint32{1, 3} {
		qkv, dout := f32MemOf(qkvV), f32MemOf(doutV)
		out, lse := emu.Alloc(4*nout), emu.Alloc(4*B*NH*T)
		dqkv, dd := emu.Alloc(4*nqkv), emu.Alloc(4*B*NH*T)
		block := emu.Dim{X: 128}
		err := lib.Launch("gt_attention_forward", emu.Dim{X: grid}, block,
			append([]any{out, f32, lse, qkv, f32}, dims...)...)
		if err == nil {
			err = lib.Launch("gt_attention_backward_query", emu.Dim{X: grid}, block,
				append([]any{dqkv, f32, dd, dout, f32, out, f32, qkv, f32, lse}, dims...)...)
		}
		if err == nil {
			err = lib.Launch("gt_attention_backward_kv", emu.Dim{X: grid}, block,
				append([]any{dqkv, f32, dd, dout, f32, qkv, f32, lse}, dims...)...)
		}
		if err != nil {
			t.Fatalf("grid %d: %v", grid, err)
		}
		gotOut := out.Float32s()
		closeTo(t, "out", gotOut, wantOut, 1e-5)
		closeTo(t, "lse", lse.Float32s(), wantLse, 1e-5)
		// Backward reads the out the forward stored (fp32 here), as the
		// backend contract says.
		o := make([]float64, nout)
		for i, v := range gotOut {
			o[i] = float64(v)
		}
		wantD := make([]float64, nqkv)
		backendtest.RefAttentionBackward(wantD, doutV, o, qkvV, B, T, NH, KV, HD)
		closeTo(t, "dqkv", dqkv.Float32s(), wantD, 1e-5)
		for _, m := range []*emu.Mem{qkv, dout, out, lse, dqkv, dd} {
			m.Free()
		}
	}
}
