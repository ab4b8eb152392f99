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
// must still give the float64 reference's results, with a head size of 5.
func TestAttentionKernelsWalkRowsGridStride(t *testing.T) {
	lib := emu.ForTest(t)
	r := rand.New(rand.NewPCG(11, 3))
	const B, T, C, NH = 2, 9, 20, 4
	qkvV, doutV := normalF32(r, B*T*3*C), normalF32(r, B*T*C)
	wantOut, wantAtt := make([]float64, B*T*C), make([]float64, B*NH*T*T)
	backendtest.RefAttentionForward(wantOut, wantAtt, qkvV, B, T, C, NH)
	wantD := make([]float64, B*T*3*C)
	backendtest.RefAttentionBackward(wantD, doutV, qkvV, wantAtt, B, T, C, NH)
	scale := float32(1 / math.Sqrt(C/NH))
	f32 := int32(kernels.F32)
	dims := []any{int32(B), int32(T), int32(C), int32(NH)}

	for _, grid := range []uint32{1, 3} {
		qkv, dout := f32MemOf(qkvV), f32MemOf(doutV)
		out, att := emu.Alloc(4*B*T*C), emu.Alloc(4*B*NH*T*T)
		dqkv, datt := emu.Alloc(4*B*T*3*C), emu.Alloc(4*B*NH*T*T)
		block := emu.Dim{X: 128}
		err := lib.Launch("gt_attention_forward", emu.Dim{X: grid}, block,
			append([]any{out, f32, att, qkv, f32}, append(dims, scale)...)...)
		if err == nil {
			err = lib.Launch("gt_attention_backward_query", emu.Dim{X: grid}, block,
				append([]any{dqkv, f32, datt, dout, f32, qkv, f32, att}, append(dims, scale)...)...)
		}
		if err == nil {
			err = lib.Launch("gt_attention_backward_kv", emu.Dim{X: grid}, block,
				append([]any{dqkv, f32, datt, dout, f32, qkv, f32, att}, dims...)...)
		}
		if err != nil {
			t.Fatalf("grid %d: %v", grid, err)
		}
		closeTo(t, "out", out.Float32s(), wantOut, 1e-5)
		closeTo(t, "att", att.Float32s(), wantAtt, 1e-5)
		closeTo(t, "dqkv", dqkv.Float32s(), wantD, 1e-5)
		for _, m := range []*emu.Mem{qkv, dout, out, att, dqkv, datt} {
			m.Free()
		}
	}
}
