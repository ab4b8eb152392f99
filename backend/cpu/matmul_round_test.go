package cpu_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
)

// fp32OutBF16 is the Go GEMM without BgemmRound: the backend then runs
// bf16 products into fp32 scratch and narrows it, the path every other
// GEMM takes.
type fp32OutBF16 struct {
	blas.Impl
	blas.BF16Impl
}

// TestMatmulForwardRoundedBF16 holds the bf16 MatmulForward that rounds
// each GEMM tile as it is finished (BgemmRound) to the fp32-then-narrow
// path bit for bit, with and without a bias, over shapes with ragged tiles
// and a parallel split.
func TestMatmulForwardRoundedBF16(t *testing.T) {
	g := blas.NewGo(2)
	fast := cpu.New(cpu.Options{Gemm: g, Threads: 2})
	slow := cpu.New(cpu.Options{Gemm: fp32OutBF16{Impl: g, BF16Impl: g}, Threads: 2})
	rng := rand.New(rand.NewPCG(41, 42))
	for _, sh := range [][3]int{{1, 1, 1}, {37, 45, 70}, {300, 256, 1000}} {
		N, C, OC := sh[0], sh[1], sh[2]
		vals := func(n int) []float32 {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			return v
		}
		x, w, b := vals(N*C), vals(OC*C), vals(OC)
		for _, withBias := range []bool{false, true} {
			var outs [2][]float32
			for i, be := range []*cpu.Backend{fast, slow} {
				alloc := func(n int) backend.Buffer {
					buf, err := be.Alloc(backend.Device, backend.Activations, backend.BF16, n)
					if err != nil {
						t.Fatal(err)
					}
					return buf
				}
				out, inp, wt := alloc(N*OC), alloc(N*C), alloc(OC*C)
				var bias backend.Buffer
				if withBias {
					bias = alloc(OC)
					if err := backend.WriteF32(be, bias, b); err != nil {
						t.Fatal(err)
					}
				}
				for _, p := range []struct {
					buf backend.Buffer
					v   []float32
				}{{inp, x}, {wt, w}} {
					if err := backend.WriteF32(be, p.buf, p.v); err != nil {
						t.Fatal(err)
					}
				}
				be.MatmulForward(out, inp, wt, bias, N, C, OC)
				got, err := backend.ReadF32(be, out)
				if err != nil {
					t.Fatal(err)
				}
				outs[i] = got
			}
			for i := range outs[0] {
				if math.Float32bits(outs[0][i]) != math.Float32bits(outs[1][i]) {
					t.Fatalf("N %d C %d OC %d bias %v: out[%d] = %g rounded per tile, %g through fp32", N, C, OC, withBias, i, outs[0][i], outs[1][i])
				}
			}
		}
	}
}
