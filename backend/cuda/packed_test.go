package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/compare"
)

// viewOp is one op of the vectorised kernels over tensors of the given
// lengths; outs are the tensors it writes.
type viewOp struct {
	name string
	lens []int
	outs []int
	// dts gives each tensor's dtype for the activation dtype dt.
	dts func(dt backend.DType) []backend.DType
	run func(be backend.Backend, x []backend.Buffer)
}

// viewOps are the ops whose kernels move packs, at N rows of C and I
// columns that leave every row a partial last pack.
func viewOps() []viewOp {
	const N, C, I = 5, 13, 11
	const n = N * C
	f32 := backend.F32
	same := func(k int) func(backend.DType) []backend.DType {
		return func(dt backend.DType) []backend.DType {
			d := make([]backend.DType, k)
			for i := range d {
				d[i] = dt
			}
			return d
		}
	}
	// with sets the listed tensors to F32 (statistics, fp32 parameters).
	with := func(k int, fp32 ...int) func(backend.DType) []backend.DType {
		return func(dt backend.DType) []backend.DType {
			d := same(k)(dt)
			for _, i := range fp32 {
				d[i] = f32
			}
			return d
		}
	}
	dec := func(be backend.Backend) backend.DecoderOps { return be.(backend.DecoderOps) }
	return []viewOp{
		{"add", []int{n, n, n}, []int{0}, same(3),
			func(be backend.Backend, x []backend.Buffer) { be.Add(x[0], x[1], x[2], n) }},
		{"add mixed", []int{n, n, n}, []int{0}, with(3, 2),
			func(be backend.Backend, x []backend.Buffer) { be.Add(x[0], x[1], x[2], n) }},
		{"scale", []int{n}, []int{0}, same(1),
			func(be backend.Backend, x []backend.Buffer) { be.Scale(x[0], -0.37) }},
		{"cast", []int{n, n}, []int{0}, func(dt backend.DType) []backend.DType {
			if dt == f32 {
				return []backend.DType{f32, backend.BF16}
			}
			return []backend.DType{dt, f32}
		}, func(be backend.Backend, x []backend.Buffer) { be.Copy(x[0], x[1]) }},
		{"gelu forward", []int{n, n}, []int{0}, same(2),
			func(be backend.Backend, x []backend.Buffer) { be.GeluForward(x[0], x[1], n) }},
		{"gelu backward", []int{n, n, n}, []int{0}, same(3),
			func(be backend.Backend, x []backend.Buffer) { be.GeluBackward(x[0], x[1], x[2], n) }},
		{"layernorm forward", []int{n, N, N, n, C, C}, []int{0, 1, 2}, with(6, 1, 2, 5),
			func(be backend.Backend, x []backend.Buffer) {
				be.LayerNormForward(x[0], x[1], x[2], x[3], x[4], x[5], N, C)
			}},
		{"layernorm backward", []int{n, C, C, n, n, C, N, N}, []int{0, 1, 2}, with(8, 1, 6, 7),
			func(be backend.Backend, x []backend.Buffer) {
				be.LayerNormBackward(x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], N, C)
			}},
		{"matmul bias", []int{N * I, n, I * C, I}, []int{0}, with(4, 3),
			func(be backend.Backend, x []backend.Buffer) { be.MatmulForward(x[0], x[1], x[2], x[3], N, C, I) }},
		{"matmul dbias", []int{N * I, C * I, C, n, N * I, C * I}, []int{0, 1, 2}, with(6, 1, 2, 5),
			func(be backend.Backend, x []backend.Buffer) {
				be.MatmulBackward(x[0], x[1], x[2], x[3], x[4], x[5], N, I, C)
			}},
		{"rmsnorm forward", []int{n, N, n, C}, []int{0, 1}, with(4, 1, 3),
			func(be backend.Backend, x []backend.Buffer) {
				dec(be).RMSNormForward(x[0], x[1], x[2], x[3], N, C, 1e-6)
			}},
		{"residual rmsnorm", []int{n, n, N, n, n, C}, []int{0, 1, 2}, with(6, 2, 4),
			func(be backend.Backend, x []backend.Buffer) {
				dec(be).ResidualRMSNormForward(x[0], x[1], x[2], x[3], x[4], x[5], N, C, 1e-5)
			}},
		{"rmsnorm backward", []int{n, C, n, n, C, N}, []int{0, 1}, with(6, 5),
			func(be backend.Backend, x []backend.Buffer) {
				dec(be).RMSNormBackward(x[0], x[1], x[2], x[3], x[4], x[5], N, C)
			}},
		{"adamw", []int{n, n, n, n, n}, []int{0, 1, 3, 4}, with(5, 1, 3, 4),
			func(be backend.Backend, x []backend.Buffer) {
				be.AdamW(x[0], x[1], x[2], x[3], x[4], backend.AdamWParams{LR: 1e-2, Beta1: 0.9, Beta2: 0.95,
					Eps: 1e-8, WeightDecay: 0.1, GradScale: 0.5, Step: 3})
			}},
		{"swiglu forward", []int{N * I, 2 * N * I}, []int{0}, same(2),
			func(be backend.Backend, x []backend.Buffer) { dec(be).SwiGLUForward(x[0], x[1], N, I) }},
		{"swiglu backward", []int{2 * N * I, N * I, 2 * N * I}, []int{0}, same(3),
			func(be backend.Backend, x []backend.Buffer) { dec(be).SwiGLUBackward(x[0], x[1], x[2], N, I) }},
	}
}

// The vectorised kernels move a pack as one 16-byte access only when it is
// whole and aligned, and Buffers are views at any element offset. Every op
// runs on views whose element offsets misalign some, all or none of its
// tensors (rows and tensors with partial last packs throughout): each gives
// the same bits as at offset 0, where every pack of every row start is
// aligned, and that matches the CPU backend. The emulation fails any
// misaligned vector access, so a wrong alignment test cannot pass.
func TestPackedKernelsOnUnalignedViews(t *testing.T) {
	e := newEnv(t)
	be := e.backend(t)
	host := newHost()
	for _, dt := range []backend.DType{backend.F32, backend.BF16, backend.F16} {
		for oi, op := range viewOps() {
			dts := op.dts(dt)
			r := rand.New(rand.NewPCG(uint64(oi), uint64(dt)))
			vals := make([][]float32, len(op.lens))
			for i, n := range op.lens {
				vals[i] = make([]float32, n)
				for j := range vals[i] {
					vals[i][j] = float32(r.NormFloat64())
					if op.name == "layernorm backward" && i == 7 || op.name == "rmsnorm backward" && i == 5 ||
						op.name == "adamw" && i == 4 {
						vals[i][j] = float32(0.5 + r.Float64()) // rstd, AdamW's v
					}
				}
			}
			run := func(b backend.Backend, offs func(i int) int) [][]float32 {
				x := make([]backend.Buffer, len(op.lens))
				for i, n := range op.lens {
					base, err := b.Alloc(backend.Device, backend.Activations, dts[i], n+8)
					if err != nil {
						t.Fatal(err)
					}
					defer b.Free(base)
					x[i] = base.Slice(offs(i), n)
					if err := backend.WriteF32(b, x[i], vals[i]); err != nil {
						t.Fatal(err)
					}
				}
				op.run(b, x)
				if err := b.Sync(); err != nil {
					t.Fatalf("%s %s: %v", op.name, dt, err)
				}
				var outs [][]float32
				for _, o := range op.outs {
					got, err := backend.ReadF32(b, x[o])
					if err != nil {
						t.Fatal(err)
					}
					outs = append(outs, got)
				}
				return outs
			}
			aligned := run(be, func(int) int { return 0 })
			want := run(host, func(int) int { return 0 })
			for k, o := range op.outs {
				if bad := relOver(aligned[k], want[k], compare.Tol(dts[o])); bad != "" {
					t.Errorf("%s %s: output %d differs from the CPU backend: %s", op.name, dt, o, bad)
				}
			}
			for p := 1; p < 8; p++ {
				offs := func(i int) int { return (p * (2*i + 1)) % 8 }
				if p == 4 {
					offs = func(int) int { return 3 } // every tensor equally misaligned
				}
				got := run(be, offs)
				for k, o := range op.outs {
					for j := range got[k] {
						if math.Float32bits(got[k][j]) != math.Float32bits(aligned[k][j]) {
							t.Errorf("%s %s: output %d [%d] at view offsets %v is %g, at offset 0 %g", op.name, dt, o, j,
								offsetsOf(offs, len(op.lens)), got[k][j], aligned[k][j])
							break
						}
					}
				}
			}
		}
	}
}

// relOver describes the first element where |got−want| exceeds
// tol·(rms(want)+|want|), compare's rule, or returns "".
func relOver(got, want []float32, tol float64) string {
	var ss float64
	for _, w := range want {
		ss += float64(w) * float64(w)
	}
	rms := math.Sqrt(ss / float64(max(1, len(want))))
	for i := range want {
		if d := math.Abs(float64(got[i]) - float64(want[i])); !(d <= tol*(rms+math.Abs(float64(want[i])))) {
			return fmt.Sprintf("[%d] = %g, want %g", i, got[i], want[i])
		}
	}
	return ""
}

func offsetsOf(offs func(int) int, n int) []int {
	o := make([]int, n)
	for i := range o {
		o[i] = offs(i)
	}
	return o
}

// The reductions read packs too: on views at every offset, SumSquares gives
// the same float64 bits as at offset 0, and NonFinite finds a NaN or an
// Inf wherever it is, in the vector part or the tail.
func TestReductionsOnUnalignedViews(t *testing.T) {
	e := newEnv(t)
	be := e.backend(t)
	const n = 1037
	r := rand.New(rand.NewPCG(5, 6))
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(r.NormFloat64())
	}
	for _, dt := range []backend.DType{backend.F32, backend.BF16, backend.F16} {
		base, err := be.Alloc(backend.Device, backend.Grads, dt, n+8)
		if err != nil {
			t.Fatal(err)
		}
		var want float64
		for off := 0; off < 8; off++ {
			x := base.Slice(off, n)
			if err := backend.WriteF32(be, x, vals); err != nil {
				t.Fatal(err)
			}
			got := be.SumSquares(x)
			if off == 0 {
				want = got
			} else if math.Float64bits(got) != math.Float64bits(want) {
				t.Errorf("%s: sum of squares at offset %d is %.17g, at offset 0 %.17g", dt, off, got, want)
			}
			if be.NonFinite(x) {
				t.Errorf("%s offset %d: NonFinite on finite data", dt, off)
			}
			for _, pos := range []int{0, 9, n - 1} {
				bad := append([]float32(nil), vals...)
				bad[pos] = float32(math.Inf(1 - 2*(pos%2)))
				if pos == 9 {
					bad[pos] = float32(math.NaN())
				}
				if err := backend.WriteF32(be, x, bad); err != nil {
					t.Fatal(err)
				}
				if !be.NonFinite(x) {
					t.Errorf("%s offset %d: NonFinite misses %g at %d", dt, off, bad[pos], pos)
				}
			}
		}
		be.Free(base)
	}
}
