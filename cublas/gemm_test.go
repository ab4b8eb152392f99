package cublas

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gotrain/gotrain/cuda"
)

// TestMockCUBLAS runs the wrappers against one build of the mock cuBLAS
// (building it is most of a test's time) on a mock GPU.
func TestMockCUBLAS(t *testing.T) {
	e := newMockEnv(t)
	for _, part := range []struct {
		name string
		fn   func(*testing.T, *mockEnv)
	}{
		{"Version", testVersion},
		{"GemmEx", testGemmEx},
		{"GemmRowMajor", testGemmRowMajor},
		{"BF16RoundsToNearestEven", testGemmExBF16RoundsToNearestEven},
		{"StridedBatched", testGemmStridedBatched},
		{"StridedBatchedSideBySide", testGemmStridedBatchedSideBySide},
		{"StreamAndMathMode", testStreamAndMathMode},
		{"Workspace", testWorkspace},
		{"ArgumentChecks", testGemmArgumentChecks},
		{"EmptyProducts", testGemmEmptyProducts},
		{"ClosedHandle", testClosedHandle},
	} {
		t.Run(part.name, func(t *testing.T) { part.fn(t, e) })
	}
}

// typeCombo is one supported (A and B, C) type pair.
type typeCombo struct {
	name    string
	in, out DataType
}

func typeCombos() []typeCombo {
	return []typeCombo{{"f32", R32F, R32F}, {"bf16-bf16", R16BF, R16BF}, {"bf16-f32", R16BF, R32F}}
}

// deviceMat is a test matrix uploaded in one type, with the raw bytes
// uploaded, so padding can be checked bit for bit afterwards.
type deviceMat struct {
	mat
	typ DataType
	ptr cuda.DevicePtr
	f32 []float32
	b16 []uint16
}

func uploadMat(t *testing.T, dev *cuda.Device, m mat, typ DataType) *deviceMat {
	t.Helper()
	d := &deviceMat{mat: m, typ: typ}
	if typ == R16BF {
		d.b16 = m.bf16()
		d.ptr = upload(t, dev, d.b16)
	} else {
		d.f32 = m.f32()
		d.ptr = upload(t, dev, d.f32)
	}
	return d
}

func (d *deviceMat) matrix() Matrix { return Matrix{Ptr: d.ptr, Type: d.typ, LD: d.ld} }

// check downloads d and compares: elements (i, j) < (m, n) to ref[i+j·m]
// within tol (and bf16 rounding for a bf16 d), every other word to what
// was uploaded, bit for bit.
func (d *deviceMat) check(t *testing.T, dev *cuda.Device, ref, tol []float64, m int) {
	t.Helper()
	var got []float64
	var same func(x int) bool
	if d.typ == R16BF {
		raw := download[uint16](t, dev, d.ptr, len(d.b16))
		got = make([]float64, len(raw))
		for i, h := range raw {
			got[i] = bf16Value(h)
		}
		same = func(x int) bool { return raw[x] == d.b16[x] }
	} else {
		raw := download[float32](t, dev, d.ptr, len(d.f32))
		got = make([]float64, len(raw))
		for i, f := range raw {
			got[i] = float64(f)
		}
		same = func(x int) bool { return math.Float32bits(raw[x]) == math.Float32bits(d.f32[x]) }
	}
	bad := 0
	for x := range got {
		if !d.used(x) {
			if !same(x) && bad < 5 {
				t.Errorf("padding word %d changed to %g", x, got[x])
				bad++
			}
			continue
		}
		i, j := x%d.ld, x/d.ld
		if d.rowMajor {
			i, j = x/d.ld, x%d.ld
		}
		want, tl := ref[i+j*m], tol[i+j*m]
		ok := math.Abs(got[x]-want) <= tl
		if d.typ == R16BF {
			ok = withinBF16(got[x], want, tl)
		}
		if !ok && bad < 5 {
			t.Errorf("C(%d,%d) = %.9g, want %.9g (±%.3g)", i, j, got[x], want, tl)
			bad++
		}
	}
}

// gemmCase is one product: sizes are those of op(A) m×k, op(B) k×n, C m×n;
// pad is added to each leading dimension beyond the minimum.
type gemmCase struct {
	ta, tb      Op
	m, n, k     int
	pad         int
	alpha, beta float64
}

func (c gemmCase) String() string {
	return fmt.Sprintf("%v%v_m%dn%dk%d_pad%d_a%g_b%g", c.ta, c.tb, c.m, c.n, c.k, c.pad, c.alpha, c.beta)
}

func gemmCases() []gemmCase {
	var cs []gemmCase
	for _, ta := range []Op{NoTrans, Trans} {
		for _, tb := range []Op{NoTrans, Trans} {
			cs = append(cs,
				gemmCase{ta, tb, 5, 7, 3, 0, 1, 0},
				gemmCase{ta, tb, 17, 9, 13, 3, 1.5, -0.25},
				gemmCase{ta, tb, 1, 13, 31, 2, -0.75, 1},
				gemmCase{ta, tb, 12, 1, 1, 5, 2, 0},
			)
		}
	}
	return cs
}

// storedDims is the shape of a GEMM operand as stored, given its shape
// after op.
func storedDims(t Op, rows, cols int) (int, int) {
	if t == Trans {
		return cols, rows
	}
	return rows, cols
}

// leading is the minimum leading dimension of a rows×cols matrix plus pad.
func leading(rowMajor bool, rows, cols, pad int) int {
	if rowMajor {
		return max(cols, 1) + pad
	}
	return max(rows, 1) + pad
}

// runGemm makes random operands for c in types tc and layout, runs GemmEx
// (or GemmRowMajor), and checks C against the float64 reference.
func runGemm(t *testing.T, e *mockEnv, r *rand.Rand, c gemmCase, tc typeCombo, rowMajor bool) {
	t.Helper()
	bf := tc.in == R16BF
	ar, ac := storedDims(c.ta, c.m, c.k)
	br, bc := storedDims(c.tb, c.k, c.n)
	a := newMat(r, ar, ac, leading(rowMajor, ar, ac, c.pad), rowMajor, bf)
	b := newMat(r, br, bc, leading(rowMajor, br, bc, c.pad), rowMajor, bf)
	cm := newMat(r, c.m, c.n, leading(rowMajor, c.m, c.n, c.pad), rowMajor, tc.out == R16BF)
	ref, tol := refGemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, a, b, c.beta, cm, nil)
	if c.beta == 0 {
		// With beta 0, C must not be read: NaN in it must not reach the result.
		for i := 0; i < c.m; i++ {
			for j := 0; j < c.n; j++ {
				cm.v[cm.idx(i, j)] = math.NaN()
			}
		}
	}
	da, db, dc := uploadMat(t, e.dev, a, tc.in), uploadMat(t, e.dev, b, tc.in), uploadMat(t, e.dev, cm, tc.out)
	e.do(t, func(*cuda.Ctx) error {
		if rowMajor {
			return e.h.GemmRowMajor(c.ta, c.tb, c.m, c.n, c.k, float32(c.alpha), da.matrix(), db.matrix(), float32(c.beta), dc.matrix(), Compute32F)
		}
		return e.h.GemmEx(c.ta, c.tb, c.m, c.n, c.k, float32(c.alpha), da.matrix(), db.matrix(), float32(c.beta), dc.matrix(), Compute32F)
	})
	dc.check(t, e.dev, ref, tol, c.m)
}

func testGemmEx(t *testing.T, e *mockEnv) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range typeCombos() {
		for _, c := range gemmCases() {
			t.Run(tc.name+"/"+c.String(), func(t *testing.T) { runGemm(t, e, r, c, tc, false) })
		}
	}
}

func testGemmRowMajor(t *testing.T, e *mockEnv) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, tc := range typeCombos() {
		for _, c := range gemmCases() {
			t.Run(tc.name+"/"+c.String(), func(t *testing.T) { runGemm(t, e, r, c, tc, true) })
		}
	}
}

// testGemmExBF16RoundsToNearestEven checks the rounding of a bf16 output
// where it matters: sums exactly halfway between two bf16 values (ties go
// to the even one) and just above halfway. Row i of A is [1, d_i] and B
// is [1, 1]^T, so C(i) = 1 + d_i exactly in fp32.
func testGemmExBF16RoundsToNearestEven(t *testing.T, e *mockEnv) {
	ds := []float64{math.Ldexp(1, -8), 3 * math.Ldexp(1, -8), math.Ldexp(1, -8) + math.Ldexp(1, -12)}
	m := len(ds)
	a := make([]uint16, 2*m) // column-major m×2
	for i, d := range ds {
		if refBF16(d) != d {
			t.Fatalf("d=%g is not a bf16 value", d)
		}
		a[i], a[i+m] = bf16Bits(1), bf16Bits(d)
	}
	b := []uint16{bf16Bits(1), bf16Bits(1)}
	pa, pb, pc := upload(t, e.dev, a), upload(t, e.dev, b), upload(t, e.dev, make([]uint16, m))
	e.do(t, func(*cuda.Ctx) error {
		return e.h.GemmEx(NoTrans, NoTrans, m, 1, 2, 1, Matrix{pa, R16BF, m}, Matrix{pb, R16BF, 2}, 0, Matrix{pc, R16BF, m}, Compute32F)
	})
	got := download[uint16](t, e.dev, pc, m)
	for i, d := range ds {
		if want := refBF16(1 + d); bf16Value(got[i]) != want {
			t.Errorf("1 + %g stored as %g, want %g (round to nearest even)", d, bf16Value(got[i]), want)
		}
	}
}

// stack lays out batch matrices of one shape at stride elements from each
// other, with poison in the gaps.
func stack(ms []mat, stride int) []float64 {
	v := make([]float64, max(stride*len(ms), len(ms[0].v)))
	for i := range v {
		v[i] = poison
	}
	for b, m := range ms {
		copy(v[b*stride:], m.v)
	}
	return v
}

// uploadAs uploads v in type typ and returns the pointer, the values as
// uploaded (rounded to typ), and a function reading them back.
func uploadAs(t *testing.T, dev *cuda.Device, v []float64, typ DataType) (cuda.DevicePtr, []float64, func() []float64) {
	t.Helper()
	m := mat{v: v}
	if typ == R16BF {
		raw := m.bf16()
		sent := make([]float64, len(raw))
		for i, h := range raw {
			sent[i] = bf16Value(h)
		}
		p := upload(t, dev, raw)
		return p, sent, func() []float64 {
			got := download[uint16](t, dev, p, len(raw))
			out := make([]float64, len(got))
			for i, h := range got {
				out[i] = bf16Value(h)
			}
			return out
		}
	}
	raw := m.f32()
	sent := make([]float64, len(raw))
	for i, f := range raw {
		sent[i] = float64(f)
	}
	p := upload(t, dev, raw)
	return p, sent, func() []float64 {
		got := download[float32](t, dev, p, len(raw))
		out := make([]float64, len(got))
		for i, f := range got {
			out[i] = float64(f)
		}
		return out
	}
}

func testGemmStridedBatched(t *testing.T, e *mockEnv) {
	r := rand.New(rand.NewPCG(5, 6))
	type stridedCase struct {
		gemmCase
		batch      int
		gapA, gapC int  // extra elements between consecutive A (C) matrices
		broadcastB bool // strideB = 0: one B for every product
	}
	cases := []stridedCase{
		{gemmCase{NoTrans, Trans, 4, 5, 3, 1, 1.25, 0.5}, 3, 7, 5, false},
		{gemmCase{Trans, NoTrans, 6, 3, 9, 0, -1, 0}, 4, 0, 2, true},
		{gemmCase{Trans, Trans, 1, 7, 2, 2, 0.5, 2}, 2, 1, 0, false},
	}
	for _, tc := range typeCombos() {
		for _, rowMajor := range []bool{false, true} {
			for _, sc := range cases {
				c := sc.gemmCase
				name := fmt.Sprintf("%s/rowmajor=%v/%v_batch%d_bcastB=%v", tc.name, rowMajor, c, sc.batch, sc.broadcastB)
				t.Run(name, func(t *testing.T) {
					bf := tc.in == R16BF
					ar, ac := storedDims(c.ta, c.m, c.k)
					br, bc := storedDims(c.tb, c.k, c.n)
					lda, ldb, ldc := leading(rowMajor, ar, ac, c.pad), leading(rowMajor, br, bc, c.pad), leading(rowMajor, c.m, c.n, c.pad)
					as, cs := make([]mat, sc.batch), make([]mat, sc.batch)
					bs := make([]mat, sc.batch)
					for i := range as {
						as[i] = newMat(r, ar, ac, lda, rowMajor, bf)
						cs[i] = newMat(r, c.m, c.n, ldc, rowMajor, tc.out == R16BF)
						bs[i] = newMat(r, br, bc, ldb, rowMajor, bf)
						if sc.broadcastB {
							bs[i] = bs[0]
						}
					}
					strideA, strideB, strideC := len(as[0].v)+sc.gapA, len(bs[0].v)+3, len(cs[0].v)+sc.gapC
					nb := sc.batch
					if sc.broadcastB {
						strideB, nb = 0, 1
					}
					pa, _, _ := uploadAs(t, e.dev, stack(as, strideA), tc.in)
					pb, _, _ := uploadAs(t, e.dev, stack(bs[:nb], strideB), tc.in)
					pc, sentC, readC := uploadAs(t, e.dev, stack(cs, strideC), tc.out)
					e.do(t, func(*cuda.Ctx) error {
						A, B, C := Matrix{pa, tc.in, lda}, Matrix{pb, tc.in, ldb}, Matrix{pc, tc.out, ldc}
						if rowMajor {
							return e.h.GemmStridedBatchedRowMajor(c.ta, c.tb, c.m, c.n, c.k, float32(c.alpha), A, int64(strideA),
								B, int64(strideB), float32(c.beta), C, int64(strideC), sc.batch, Compute32F)
						}
						return e.h.GemmStridedBatchedEx(c.ta, c.tb, c.m, c.n, c.k, float32(c.alpha), A, int64(strideA),
							B, int64(strideB), float32(c.beta), C, int64(strideC), sc.batch, Compute32F)
					})
					got := readC()
					for x := range got {
						b, off := x/strideC, x%strideC
						if b < sc.batch && off < len(cs[b].v) && cs[b].used(off) {
							continue
						}
						if got[x] != sentC[x] {
							t.Errorf("word %d (batch %d, offset %d: outside every C) changed from %g to %g", x, b, off, sentC[x], got[x])
						}
					}
					for b := 0; b < sc.batch; b++ {
						ref, tol := refGemm(c.ta, c.tb, c.m, c.n, c.k, c.alpha, as[b], bs[b], c.beta, cs[b], nil)
						for i := 0; i < c.m; i++ {
							for j := 0; j < c.n; j++ {
								g := got[b*strideC+cs[b].idx(i, j)]
								w, tl := ref[i+j*c.m], tol[i+j*c.m]
								ok := math.Abs(g-w) <= tl
								if tc.out == R16BF {
									ok = withinBF16(g, w, tl)
								}
								if !ok {
									t.Errorf("batch %d C(%d,%d) = %.9g, want %.9g (±%.3g)", b, i, j, g, w, tl)
								}
							}
						}
					}
				})
			}
		}
	}
}

// testGemmStridedBatchedSideBySide: a batch whose outputs sit side by side
// in the columns of one row-major matrix (attention's per-head rows of a
// token-major tensor: C is T×(H·d) with ld = H·d and head h's T×d block at
// column h·d) is accepted and computes each block, leaving the padding
// column past the last head alone.
func testGemmStridedBatchedSideBySide(t *testing.T, e *mockEnv) {
	const T, H, d, k = 5, 3, 4, 6
	const ld = H*d + 1 // one padding column
	r := rand.New(rand.NewPCG(9, 10))
	a := make([]float32, H*T*k) // head h: T×k at h·T·k
	b := make([]float32, H*k*d) // head h: k×d at h·k·d
	c := make([]float32, T*ld)
	for _, v := range [][]float32{a, b, c} {
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
	}
	pa, pb, pc := upload(t, e.dev, a), upload(t, e.dev, b), upload(t, e.dev, c)
	e.do(t, func(*cuda.Ctx) error {
		return e.h.GemmStridedBatchedRowMajor(NoTrans, NoTrans, T, d, k, 1, Matrix{pa, R32F, k}, T*k,
			Matrix{pb, R32F, d}, k*d, 0, Matrix{pc, R32F, ld}, d, H, Compute32F)
	})
	got := download[float32](t, e.dev, pc, T*ld)
	for h := 0; h < H; h++ {
		for i := 0; i < T; i++ {
			for j := 0; j < d; j++ {
				var want float64
				for p := 0; p < k; p++ {
					want += float64(a[h*T*k+i*k+p]) * float64(b[h*k*d+p*d+j])
				}
				if g := float64(got[i*ld+h*d+j]); math.Abs(g-want) > 1e-5*(1+math.Abs(want)) {
					t.Errorf("head %d C(%d,%d) = %g, want %g", h, i, j, g, want)
				}
			}
		}
	}
	for i := 0; i < T; i++ {
		if got[i*ld+H*d] != c[i*ld+H*d] {
			t.Errorf("padding column of row %d changed", i)
		}
	}
}
