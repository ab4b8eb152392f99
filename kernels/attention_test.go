package kernels_test

import (
	"math"
	"math/rand/v2"
	"testing"

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

// attChunkCase is one chunk of an attention call: query rows
// [R0, R0+Rows) of qkv (B,T,(NH+2·KV)·HD).
type attChunkCase struct {
	B, T, NH, KV, HD, R0, Rows int
}

// rowOf is chunk row (b·KV + g)·M + r's batch row, query head and token,
// as attention.cu lays chunks out: the group's heads side by side.
func (c attChunkCase) rowOf(row int) (b, h, t int) {
	G := c.NH / c.KV
	M := G * c.Rows
	q, r := row/M, row%M
	return q / c.KV, (q%c.KV)*G + r%G, c.R0 + r/G
}

// chunkCase is the chunk the kernel tests use: three query heads a group,
// a head size of 5, a chunk in the middle of a sequence longer than a
// warp.
func chunkCase() attChunkCase { return attChunkCase{B: 2, T: 37, NH: 6, KV: 2, HD: 5, R0: 13, Rows: 9} }

// The gather copies each chunk row's query and output gradient from the
// token-major tensors and computes D = Σ dout·out; the scatter puts chunk
// rows back where they came from. Grids of one block (far fewer warps
// than rows) walk the rows grid-stride.
func TestAttentionGatherScatter(t *testing.T) {
	lib := emu.ForTest(t)
	c := chunkCase()
	r := rand.New(rand.NewPCG(11, 3))
	S, CO := (c.NH+2*c.KV)*c.HD, c.NH*c.HD
	qkvV, doutV, outV := normalF32(r, c.B*c.T*S), normalF32(r, c.B*c.T*CO), normalF32(r, c.B*c.T*CO)
	rows := c.B * c.NH * c.Rows
	f32 := int32(kernels.F32)
	qkv, dout, out := f32MemOf(qkvV), f32MemOf(doutV), f32MemOf(outV)
	qc, doc, dc := emu.Alloc(4*rows*c.HD), emu.Alloc(4*rows*c.HD), emu.Alloc(4*rows)
	back := emu.Alloc(4 * c.B * c.T * S)
	defer func() {
		for _, m := range []*emu.Mem{qkv, dout, out, qc, doc, dc, back} {
			m.Free()
		}
	}()
	err := lib.Launch("gt_attention_gather", emu.Dim{X: 1}, emu.Dim{X: 128}, qc, doc, f32, dc, qkv, f32, dout, f32, out, f32,
		int32(c.B), int32(c.T), int32(c.NH), int32(c.KV), int32(c.HD), int32(c.R0), int32(c.Rows))
	if err != nil {
		t.Fatal(err)
	}
	wantQ, wantDO, wantD := make([]float64, rows*c.HD), make([]float64, rows*c.HD), make([]float64, rows)
	for row := range rows {
		b, h, tok := c.rowOf(row)
		for d := range c.HD {
			wantQ[row*c.HD+d] = qkvV[(b*c.T+tok)*S+h*c.HD+d]
			g := doutV[(b*c.T+tok)*CO+h*c.HD+d]
			wantDO[row*c.HD+d] = g
			wantD[row] += g * outV[(b*c.T+tok)*CO+h*c.HD+d]
		}
	}
	closeTo(t, "gathered q", qc.Float32s(), wantQ, 0)
	closeTo(t, "gathered dout", doc.Float32s(), wantDO, 0)
	closeTo(t, "D", dc.Float32s(), wantD, 1e-6)

	// Scatter the gathered queries into an empty qkv: exactly the chunk's
	// query elements come back, nothing else is written.
	err = lib.Launch("gt_attention_scatter", emu.Dim{X: 2}, emu.Dim{X: 256}, back, f32, int64(S), int32(0), qc, f32,
		int32(c.B), int32(c.T), int32(c.KV), int32(c.NH/c.KV), int32(c.HD), int32(c.R0), int32(c.Rows))
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float64, len(qkvV))
	for b := range c.B {
		for tok := c.R0; tok < c.R0+c.Rows; tok++ {
			copy(want[(b*c.T+tok)*S:][:CO], qkvV[(b*c.T+tok)*S:][:CO])
		}
	}
	closeTo(t, "scattered q", back.Float32s(), want, 0)
}

// The softmax of a chunk's scores masks each row's keys after its own
// token, gives probabilities that match float64 e^(s−max)/Σ and the
// row's log-sum-exp; the backward kernel gives P = e^(s − lse) and
// dS = P·(dP − D). Both in fp32 and with bf16 outputs (rounded once).
func TestAttentionSoftmaxKernels(t *testing.T) {
	lib := emu.ForTest(t)
	c := chunkCase()
	r := rand.New(rand.NewPCG(5, 8))
	rows, cols := c.B*c.NH*c.Rows, c.R0+c.Rows
	ld := cols + 3
	sV, dpV, dV := normalF32(r, rows*ld), normalF32(r, rows*ld), normalF32(r, rows)
	for i := range sV {
		sV[i] = float64(float32(3 * sV[i]))
	}
	wantP, wantLse := make([]float64, rows*ld), make([]float64, c.B*c.NH*c.T)
	wantDS := make([]float64, rows*ld)
	lseOf := make([]float64, rows)
	for row := range rows {
		b, h, tok := c.rowOf(row)
		m := math.Inf(-1)
		for k := 0; k <= tok; k++ {
			m = math.Max(m, sV[row*ld+k])
		}
		var l float64
		for k := 0; k <= tok; k++ {
			l += math.Exp(sV[row*ld+k] - m)
		}
		lseOf[row] = m + math.Log(l)
		wantLse[(b*c.NH+h)*c.T+tok] = lseOf[row]
		for k := 0; k <= tok; k++ {
			p := math.Exp(sV[row*ld+k]-m) / l
			wantP[row*ld+k] = p
			wantDS[row*ld+k] = p * (dpV[row*ld+k] - dV[row])
		}
	}
	inCols := func(v []float32) []float32 { // the first cols of every row
		out := make([]float32, 0, rows*cols)
		for row := range rows {
			out = append(out, v[row*ld:row*ld+cols]...)
		}
		return out
	}
	want := func(v []float64) []float64 {
		out := make([]float64, 0, rows*cols)
		for row := range rows {
			out = append(out, v[row*ld:row*ld+cols]...)
		}
		return out
	}
	dims := []any{int32(c.B), int32(c.T), int32(c.NH), int32(c.KV), int32(c.R0), int32(c.Rows), int32(cols)}
	for _, dt := range []kernels.DType{kernels.F32, kernels.BF16} {
		name := map[kernels.DType]string{kernels.F32: "fp32", kernels.BF16: "bf16"}[dt]
		tol := 1e-6
		if dt == kernels.BF16 {
			tol = 1.0 / 256
		}
		s, dp, dc := f32MemOf(sV), f32MemOf(dpV), f32MemOf(dV)
		p, ds, lse := emu.Alloc(4*rows*ld), emu.Alloc(4*rows*ld), emu.Alloc(4*c.B*c.NH*c.T)
		err := lib.Launch("gt_attention_softmax", emu.Dim{X: 3}, emu.Dim{X: 128},
			append([]any{p, int32(dt), lse, s, int64(ld)}, dims...)...)
		if err != nil {
			t.Fatal(err)
		}
		closeTo(t, name+" P", inCols(widen(p, dt)), want(wantP), tol)
		gotLse := lse.Float32s()
		for row := range rows {
			b, h, tok := c.rowOf(row)
			if g, w := float64(gotLse[(b*c.NH+h)*c.T+tok]), lseOf[row]; math.Abs(g-w) > 1e-6*(1+math.Abs(w)) {
				t.Errorf("%s lse of row %d = %g, want %g", name, row, g, w)
			}
		}
		// Backward from the lse just computed: P again, and dS.
		p.Free()
		p = emu.Alloc(4 * rows * ld)
		err = lib.Launch("gt_attention_dsoftmax", emu.Dim{X: 7}, emu.Dim{X: 128},
			append([]any{p, ds, int32(dt), s, dp, int64(ld), lse, dc}, dims...)...)
		if err != nil {
			t.Fatal(err)
		}
		closeTo(t, name+" backward P", inCols(widen(p, dt)), want(wantP), tol)
		closeTo(t, name+" dS", inCols(widen(ds, dt)), want(wantDS), tol)
		for _, m := range []*emu.Mem{s, dp, dc, p, ds, lse} {
			m.Free()
		}
	}
}

// widen reads m as a buffer of dt elements, as fp32.
func widen(m *emu.Mem, dt kernels.DType) []float32 {
	if dt == kernels.F32 {
		return m.Float32s()
	}
	b := m.Bytes()
	out := make([]float32, len(b)/2)
	for i := range out {
		out[i] = math.Float32frombits((uint32(b[2*i]) | uint32(b[2*i+1])<<8) << 16)
	}
	return out
}
