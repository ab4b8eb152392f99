package cpu_test

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/backendtest"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
)

// attentionHeap runs an fp32 forward and backward twice on a fresh backend
// and returns the bytes the Go heap handed out during the first pair (the
// tile scratch the pool has to create) and the second (steady state),
// counted by the runtime's allocator (TotalAlloc). The operands are
// allocated before counting starts.
func attentionHeap(t *testing.T, B, T, NH, KV, HD, threads int) (first, second uint64) {
	t.Helper()
	be := cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: threads})
	alloc := func(n int) backend.Buffer {
		b, err := be.Alloc(backend.Device, backend.Activations, backend.F32, n)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { be.Free(b) })
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(i%13)/13 - 0.5
		}
		if err := backend.WriteF32(be, b, v); err != nil {
			t.Fatal(err)
		}
		return b
	}
	nqkv, nout := B*T*(NH+2*KV)*HD, B*T*NH*HD
	qkv, dout := alloc(nqkv), alloc(nout)
	out, lse, dqkv := alloc(nout), alloc(B*NH*T), alloc(nqkv)
	var m [3]runtime.MemStats
	runtime.ReadMemStats(&m[0])
	for i := 1; i <= 2; i++ {
		be.AttentionForward(out, lse, qkv, B, T, NH, KV, HD)
		be.AttentionBackward(dqkv, dout, out, qkv, lse, B, T, NH, KV, HD)
		runtime.ReadMemStats(&m[i])
	}
	return m[1].TotalAlloc - m[0].TotalAlloc, m[2].TotalAlloc - m[1].TotalAlloc
}

// The CPU backend's attention scratch is not accounted in any pool, so
// this counts it at the Go allocator. With a worker per (batch row,
// key/value head) it is a few tiles per worker, the same at T = 1024 as at
// T = 256 (a (T,T) score matrix would be 16× larger at 1024 and is 4 MiB
// per head there). When the key/value heads are fewer than the workers
// (MQA, one batch row), backward adds dQ partials of (T, NH·HD): linear in
// T. Repeated calls reuse the pool: no steady-state allocation beyond the
// workers' goroutines.
func TestAttentionScratchDoesNotGrowAsTSquared(t *testing.T) {
	const threads = 2
	for _, c := range []struct {
		name  string
		NH    int
		KV    int
		fixed bool // scratch independent of T
	}{{"GQA", 4, 2, true}, {"MQA", 4, 1, false}} {
		small, smallWarm := attentionHeap(t, 1, 256, c.NH, c.KV, 64, threads)
		large, largeWarm := attentionHeap(t, 1, 1024, c.NH, c.KV, 64, threads)
		t.Logf("%s: first call %d bytes at T=256, %d at T=1024; repeated calls %d and %d", c.name, small, large, smallWarm, largeWarm)
		limit := 4 * small // linear growth
		if c.fixed {
			limit = small + small/4
		}
		if large > limit {
			t.Errorf("%s: attention scratch %d bytes at T=256 grows to %d at T=1024, over %d", c.name, small, large, limit)
		}
		const warmLimit = 16 << 10
		if smallWarm > warmLimit || largeWarm > warmLimit {
			t.Errorf("%s: repeated calls allocate %d and %d bytes, want under %d (the scratch pool is not reused)", c.name, smallWarm, largeWarm, warmLimit)
		}
	}
}

// newAttDefaultGemm is the backend training uses: OpenBLAS where it loads,
// gonum otherwise (the other benchmarks measure gonum).
func newAttDefaultGemm() *cpu.Backend {
	impl, _ := blas.Default(0)
	return cpu.New(cpu.Options{Gemm: impl})
}

// gpt2-tiny's attention (B8 T256 NH4 HD64) on the GEMM training uses.
func BenchmarkAttentionForwardDefaultGemmB8T256C256NH4(b *testing.B) {
	backendtest.BenchAttentionForward(b, newAttDefaultGemm(), backend.F32, 8, 256, 4, 4, 64)
}
func BenchmarkAttentionBackwardDefaultGemmB8T256C256NH4(b *testing.B) {
	backendtest.BenchAttentionBackward(b, newAttDefaultGemm(), backend.F32, 8, 256, 4, 4, 64)
}

// GPT-2's heads (NH12 HD64) at long sequences, where a (B,NH,T,T) buffer
// would be 48 MiB (T=1024) and 192 MiB (T=2048) per layer.
func BenchmarkAttentionForwardB1T1024NH12HD64(b *testing.B) {
	backendtest.BenchAttentionForward(b, newGonum(), backend.F32, 1, 1024, 12, 12, 64)
}
func BenchmarkAttentionBackwardB1T1024NH12HD64(b *testing.B) {
	backendtest.BenchAttentionBackward(b, newGonum(), backend.F32, 1, 1024, 12, 12, 64)
}
func BenchmarkAttentionForwardB1T2048NH12HD64(b *testing.B) {
	backendtest.BenchAttentionForward(b, newGonum(), backend.F32, 1, 2048, 12, 12, 64)
}
func BenchmarkAttentionBackwardB1T2048NH12HD64(b *testing.B) {
	backendtest.BenchAttentionBackward(b, newGonum(), backend.F32, 1, 2048, 12, 12, 64)
}

// Llama-3-8B's grouping (32 query heads on 8 key/value heads of 128).
func BenchmarkAttentionForwardB1T1024NH32KV8HD128(b *testing.B) {
	backendtest.BenchAttentionForward(b, newGonum(), backend.F32, 1, 1024, 32, 8, 128)
}
func BenchmarkAttentionBackwardB1T1024NH32KV8HD128(b *testing.B) {
	backendtest.BenchAttentionBackward(b, newGonum(), backend.F32, 1, 1024, 32, 8, 128)
}

// FuzzAttention checks forward and backward against the float64 reference
// on shapes drawn around the tile edges: T across one to three tiles, head
// sizes on both sides of the width where tiles shrink (64), every grouping
// of up to six query heads, and worker counts above and below the number
// of (batch row, key/value head) pairs, which decides whether backward
// splits key tiles into parts.
func FuzzAttention(f *testing.F) {
	f.Add(uint64(1), uint8(0), uint8(63), uint8(3), uint8(1), uint8(15), uint8(1))
	f.Add(uint64(2), uint8(1), uint8(129), uint8(5), uint8(2), uint8(71), uint8(3))
	f.Add(uint64(3), uint8(0), uint8(0), uint8(0), uint8(0), uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, seed uint64, b, tt, nh, kvPick, hd, threads uint8) {
		B, T, NH, HD := 1+int(b)%2, 1+int(tt)%130, 1+int(nh)%6, 1+int(hd)%72
		var divisors []int
		for kv := 1; kv <= NH; kv++ {
			if NH%kv == 0 {
				divisors = append(divisors, kv)
			}
		}
		KV := divisors[int(kvPick)%len(divisors)]
		be := cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1 + int(threads)%4})
		nqkv, nout := B*T*(NH+2*KV)*HD, B*T*NH*HD
		rng := newAttRNG(seed)
		qkvV, doutV := rng.normals(nqkv), rng.normals(nout)
		put := func(v []float64) backend.Buffer {
			buf, err := be.Alloc(backend.Device, backend.Activations, backend.F32, len(v))
			if err != nil {
				t.Fatal(err)
			}
			f32 := make([]float32, len(v))
			for i, x := range v {
				f32[i] = float32(x)
			}
			if err := backend.WriteF32(be, buf, f32); err != nil {
				t.Fatal(err)
			}
			return buf
		}
		qkv, dout := put(qkvV), put(doutV)
		out, lse, dqkv := put(make([]float64, nout)), put(make([]float64, B*NH*T)), put(make([]float64, nqkv))
		be.AttentionForward(out, lse, qkv, B, T, NH, KV, HD)
		be.AttentionBackward(dqkv, dout, out, qkv, lse, B, T, NH, KV, HD)
		wantOut, wantLse, wantD := make([]float64, nout), make([]float64, B*NH*T), make([]float64, nqkv)
		backendtest.RefAttentionForward(wantOut, wantLse, qkvV, B, T, NH, KV, HD)
		backendtest.RefAttentionBackward(wantD, doutV, nil, qkvV, B, T, NH, KV, HD)
		for _, c := range []struct {
			name string
			got  backend.Buffer
			want []float64
		}{{"out", out, wantOut}, {"lse", lse, wantLse}, {"dqkv", dqkv, wantD}} {
			got, err := backend.ReadF32(be, c.got)
			if err != nil {
				t.Fatal(err)
			}
			if i, ok := attWithin(got, c.want, 2e-5); !ok {
				t.Fatalf("B%d T%d NH%d KV%d HD%d threads %d: %s[%d] = %g, reference %g", B, T, NH, KV, HD,
					be.Threads(), c.name, i, got[i], c.want[i])
			}
		}
	})
}

// attWithin reports the first i where |got−want| > tol·(scale + |want|),
// scale being rms(want) but at least 1: with unit-variance inputs the
// scores and outputs are O(1), and fp32 rounding of a dot product is
// relative to its terms, not to a result that cancels to near zero (T = 1
// has one score).
func attWithin(got []float32, want []float64, tol float64) (int, bool) {
	ss := 0.0
	for _, w := range want {
		ss += w * w
	}
	rms := max(1, math.Sqrt(ss/float64(max(len(want), 1))))
	for i, w := range want {
		if !(math.Abs(float64(got[i])-w) <= tol*(rms+math.Abs(w))) {
			return i, false
		}
	}
	return 0, true
}

// attRNG draws N(0,1) values from a seeded PCG.
type attRNG struct{ r *rand.Rand }

func newAttRNG(seed uint64) attRNG { return attRNG{rand.New(rand.NewPCG(seed, 17))} }

func (p attRNG) normals(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(float32(p.r.NormFloat64()))
	}
	return v
}
