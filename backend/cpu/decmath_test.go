package cpu

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// TestDecoderKernels holds the decoder ops' row kernels (vector ones in a
// GOEXPERIMENT=simd build on AVX-512) to their scalar loops: bit for bit for
// the elementwise kernels, including the scalar tails of every length and
// the tails of exp, and to 1e-12 relative for the float64 sums, whose order
// differs. The backend suite checks the scalar loops against the float64
// references.
func TestDecoderKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	vec := func(n int, sd float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64()) * sd
		}
		return v
	}
	same := func(what string, n int, got, want []float32) {
		t.Helper()
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s, n=%d: [%d] = %g, scalar loop gives %g", what, n, i, got[i], want[i])
			}
		}
	}
	near := func(what string, n int, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-12*math.Abs(want) {
			t.Fatalf("%s, n=%d: %.17g, scalar loop gives %.17g", what, n, got, want)
		}
	}
	for _, n := range []int{0, 1, 5, 15, 16, 17, 31, 32, 33, 64, 100, 1027} {
		x, w, d := vec(n, 1), vec(n, 1), vec(n, 1)
		near("sumSquares", n, sumSquares(x), sumSquaresScalar(x))

		o, want := vec(n, 1), vec(n, 1)
		scaleMul(o, x, w, 0.37)
		scaleMulScalar(want, x, w, 0.37)
		same("scaleMul", n, o, want)

		pw := vec(n, 1)
		pwWant := slices.Clone(pw)
		rmsNormBackwardRow(o, pw, x, d, w, 1.7)
		rmsNormBackwardRowScalar(want, pwWant, x, d, w, 1.7)
		// m, the row mean, is a float64 sum rounded to float32: vector and
		// scalar may differ in its last bit, and o with it.
		for i := range want {
			if math.Abs(float64(o[i]-want[i])) > 1e-6*(1+math.Abs(float64(want[i]))) {
				t.Fatalf("rmsNormBackwardRow, n=%d: dinp[%d] = %g, scalar loop gives %g", n, i, o[i], want[i])
			}
		}
		same("rmsNormBackwardRow dweight", n, pw, pwWant)

		// Gates over exp32's whole range and past its clamps.
		g, u := vec(n, 30), vec(n, 1)
		if n > 3 {
			g[0], g[1], g[2] = -200, 200, float32(math.Inf(-1))
		}
		e := make([]float32, n)
		siluMul(o, g, u, e)
		siluMulScalar(want, g, u, e)
		same("siluMul", n, o, want)
		du, duWant := vec(n, 1), vec(n, 1)
		siluMulBackward(o, du, d, g, u, e)
		siluMulBackwardScalar(want, duWant, d, g, u, e)
		same("siluMulBackward dgate", n, o, want)
		same("siluMulBackward dup", n, du, duWant)

		if n%2 == 0 {
			h := n / 2
			c, s := vec(h, 1), vec(h, 1)
			rotateHalf(o, x, c, s)
			rotateHalfScalar(want, x, c, s, 0)
			same("rotateHalf", n, o, want)
			in := slices.Clone(x)
			rotateHalf(in, in, c, s)
			same("rotateHalf in place", n, in, want)
			unrotateHalf(o, x, c, s)
			unrotateHalfScalar(want, x, c, s, 0)
			same("unrotateHalf", n, o, want)
			in = slices.Clone(x)
			unrotateHalf(in, in, c, s)
			same("unrotateHalf in place", n, in, want)
		}
	}
}

// TestExpRowBF16 holds the classifier's exp pass over a bf16 row, widened
// in registers, to the same pass over the row widened first: the same max,
// the same sum bit for bit and the same exps, at lengths that leave every
// tail and with NaN and infinite logits among them; and expRow plus its
// normalisation to softmaxRow.
func TestExpRowBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for _, n := range []int{1, 15, 16, 17, 33, 1000, 50257} {
		x := make([]uint16, n)
		for i := range x {
			x[i] = backend.BF16FromF32(float32(rng.NormFloat64() * 8))
		}
		if n > 40 {
			x[5], x[20] = 0x7f80, 0xff80 // +Inf, -Inf
		}
		wide := make([]float32, n)
		for i, h := range x {
			wide[i] = backend.F32FromBF16(h)
		}
		p, want := make([]float32, n), make([]float32, n)
		m, sum := expRowBF16(p, x)
		mWant, sumWant := expRow(want, wide)
		if math.Float32bits(m) != math.Float32bits(mWant) || math.Float64bits(sum) != math.Float64bits(sumWant) {
			t.Fatalf("n=%d: max %g sum %.17g, on the widened row %g %.17g", n, m, sum, mWant, sumWant)
		}
		for i := range p {
			if math.Float32bits(p[i]) != math.Float32bits(want[i]) {
				t.Fatalf("n=%d: e[%d] = %g, on the widened row %g", n, i, p[i], want[i])
			}
		}
		soft := make([]float32, n)
		softmaxRow(soft, wide)
		inv := float32(1 / sum)
		for i := range soft {
			if e := want[i] * inv; math.Float32bits(soft[i]) != math.Float32bits(e) {
				t.Fatalf("n=%d: softmax[%d] = %g, expRow·(1/Σ) %g", n, i, soft[i], e)
			}
		}
	}
}

// TestDecoderBF16Views holds vload and vstore, the decoder ops' BF16
// conversions, to fview's load and store bit for bit on random bit patterns
// (NaNs with payloads, infinities, subnormals, rounding ties among them) at
// lengths that leave every tail.
func TestDecoderBF16Views(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{0, 1, 15, 16, 17, 40, 1000} {
		f := make([]float32, n)
		for i := range f {
			f[i] = math.Float32frombits(rng.Uint32())
		}
		for i := 0; i+4 <= n; i += 7 { // exact ties: the dropped half is 0x8000
			f[i] = math.Float32frombits(rng.Uint32()&^0xffff | 0x8000)
		}
		got, want := fview{dt: backend.BF16, u16: make([]uint16, n)}, fview{dt: backend.BF16, u16: make([]uint16, n)}
		got.vstore(0, f)
		want.store(0, f)
		if !slices.Equal(got.u16, want.u16) {
			for i := range f {
				if got.u16[i] != want.u16[i] {
					t.Fatalf("vstore, n=%d: %#08x → %#04x, store gives %#04x", n, math.Float32bits(f[i]), got.u16[i], want.u16[i])
				}
			}
		}
		wide, wideWant := got.vload(0, n, make([]float32, n)), got.load(0, n, make([]float32, n))
		for i := range wide {
			if math.Float32bits(wide[i]) != math.Float32bits(wideWant[i]) {
				t.Fatalf("vload, n=%d: %#04x → %#08x, load gives %#08x", n, got.u16[i], math.Float32bits(wide[i]), math.Float32bits(wideWant[i]))
			}
		}
		x, y := make([]float32, n), make([]float32, n)
		for i := range x {
			x[i], y[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		o, oWant := make([]float32, n), make([]float32, n)
		addRow(o, x, y)
		addRowScalar(oWant, x, y)
		if !slices.Equal(o, oWant) {
			t.Fatalf("addRow, n=%d: differs from the scalar loop", n)
		}
		// The classifier's dlogits: x·a·b, in fp32 and rounded to bf16 in
		// one pass, against the scalar products then store; scales that
		// push products into overflow, subnormals and rounding ties.
		for _, sc := range []float32{1, 0.37, -3e-39, 1e38} {
			const a = 1.0 / 3
			scaleRow(o, f, a, sc)
			for i := range oWant {
				oWant[i] = f[i] * a
				oWant[i] *= sc
			}
			for i := range o {
				if math.Float32bits(o[i]) != math.Float32bits(oWant[i]) {
					t.Fatalf("scaleRow, n=%d, s=%g: [%d] = %#08x, scalar %#08x", n, sc, i, math.Float32bits(o[i]), math.Float32bits(oWant[i]))
				}
			}
			got.vstoreScaled(0, f, a, sc)
			want.store(0, oWant)
			for i := range f {
				if got.u16[i] != want.u16[i] {
					t.Fatalf("vstoreScaled, n=%d, s=%g: %#08x → %#04x, store of the product gives %#04x", n, sc, math.Float32bits(f[i]), got.u16[i], want.u16[i])
				}
			}
			got.storeScaled(0, f, a, sc)
			if !slices.Equal(got.u16, want.u16) {
				t.Fatalf("storeScaled, n=%d, s=%g: differs from store of the product", n, sc)
			}
		}
	}
}

// FuzzDecoderKernels feeds arbitrary float32 bit patterns (as gates, ups,
// gradients, rows and angles) to the elementwise decoder kernels and
// requires the vector and scalar loops to agree bit for bit, any NaN
// matching any NaN (x86 keeps the payload of whichever operand comes first,
// which the two loops need not order alike).
func FuzzDecoderKernels(f *testing.F) {
	seed := func(vals ...float32) []byte {
		b := make([]byte, 4*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		return b
	}
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	f.Add(seed(1, -2, 3, 0.5, 100, -100, 88.5, -88.5, 1e-30, -1e-45, inf, -inf, nan, 0, 65504, 3.4e38,
		1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32,
		-1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11, -12, -13, -14, -15, -16))
	f.Fuzz(func(t *testing.T, raw []byte) {
		v := make([]float32, len(raw)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		n := len(v) / 4 // four operands of n
		a, b, c, d := v[:n], v[n:2*n], v[2*n:3*n], v[3*n:4*n]
		same := func(what string, got, want []float32) {
			for i := range want {
				gn, wn := got[i] != got[i], want[i] != want[i]
				if gn != wn || !gn && math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s [%d]: vector %g (%#08x), scalar %g (%#08x)", what, i,
						got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
				}
			}
		}
		o, want, e := make([]float32, n), make([]float32, n), make([]float32, n)
		o2, want2 := make([]float32, n), make([]float32, n)
		siluMul(o, a, b, e)
		siluMulScalar(want, a, b, e)
		same("siluMul", o, want)
		siluMulBackward(o, o2, c, a, b, e)
		siluMulBackwardScalar(want, want2, c, a, b, e)
		same("siluMulBackward dgate", o, want)
		same("siluMulBackward dup", o2, want2)
		s := float32(1.5)
		if n > 0 {
			s = d[0]
		}
		scaleMul(o, a, b, s)
		scaleMulScalar(want, a, b, s)
		same("scaleMul", o, want)
		addRow(o, a, b)
		addRowScalar(want, a, b)
		same("addRow", o, want)
		h := n / 2
		rotateHalf(o[:2*h], a[:2*h], c[:h], d[:h])
		rotateHalfScalar(want[:2*h], a[:2*h], c[:h], d[:h], 0)
		same("rotateHalf", o[:2*h], want[:2*h])
		unrotateHalf(o[:2*h], a[:2*h], c[:h], d[:h])
		unrotateHalfScalar(want[:2*h], a[:2*h], c[:h], d[:h], 0)
		same("unrotateHalf", o[:2*h], want[:2*h])
		bf, bfWant := fview{dt: backend.BF16, u16: make([]uint16, n)}, fview{dt: backend.BF16, u16: make([]uint16, n)}
		bf.vstore(0, a)
		bfWant.store(0, a)
		if !slices.Equal(bf.u16, bfWant.u16) {
			t.Fatalf("vstore differs from store on %v", a)
		}
	})
}

// TestGeluAdamWKernels holds GELU's forward and backward row kernels and
// AdamW's update to their scalar loops bit for bit (vector ones in a
// GOEXPERIMENT=simd build on AVX-512), over every tail length, inputs
// across exp's range and past its clamps, and moments of many scales. The
// backend suite checks the ops against float64 references.
func TestGeluAdamWKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	vec := func(n int, sd float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * sd)
		}
		return v
	}
	same := func(what string, n int, got, want []float32) {
		t.Helper()
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s, n=%d: [%d] = %g, scalar loop gives %g", what, n, i, got[i], want[i])
			}
		}
	}
	for _, n := range []int{0, 1, 15, 16, 17, 33, 100, 1027} {
		x, g := vec(n, 3), vec(n, 1)
		if n > 3 {
			x[0], x[1], x[2] = -60, 60, 1e-30
		}
		e := make([]float32, n)
		o, want := make([]float32, n), make([]float32, n)
		geluRow(o, x, e)
		geluRowScalar(want, x, e)
		same("geluRow", n, o, want)
		geluBackwardRow(o, x, g, e)
		geluBackwardRowScalar(want, x, g, e)
		same("geluBackwardRow", n, o, want)

		w, m, v := vec(n, 0.1), vec(n, 1e-3), vec(n, 1)
		for i := range v {
			v[i] *= v[i] * float32(math.Pow(10, float64(i%9-6)))
		}
		w2, m2, v2 := slices.Clone(w), slices.Clone(m), slices.Clone(v)
		c := adamwConsts{b1: 0.9, b2: 0.95, bc1: 0.19, bc2: 0.0975, lr: 3e-4, eps: 1e-8, wd: 0.1, gs: 0.5}
		adamwRow(w, g, m, v, c)
		adamwRowScalar(w2, g, m2, v2, c)
		same("adamwRow w", n, w, w2)
		same("adamwRow m", n, m, m2)
		same("adamwRow v", n, v, v2)
	}
}
