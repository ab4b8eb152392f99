package backendtest

import (
	"math"
	"math/rand/v2"
	"testing"
)

// These tests pin the decoder references to finite differences of their own
// float64 forwards and to properties known from the math, independently of
// any backend.

func refNormal(rng *rand.Rand, n int, sd float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.NormFloat64() * sd
	}
	return v
}

func TestRefRMSNormFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const N, C = 3, 7
	for _, eps := range []float64{1e-6, 1e-5} {
		x, w, dout := refNormal(rng, N*C, 1), refNormal(rng, C, 1), refNormal(rng, N*C, 1)
		for i := C; i < 2*C; i++ {
			x[i] *= 0.01 // mean(x²) ≈ 1e-4: eps shifts rstd by up to 5%
		}
		out, rstd := make([]float64, N*C), make([]float64, N)
		RefRMSNormForward(out, rstd, x, w, N, C, eps)
		dx, dw := make([]float64, N*C), make([]float64, C)
		RefRMSNormBackward(dx, dw, dout, x, w, rstd, N, C)
		L := func() float64 { RefRMSNormForward(out, rstd, x, w, N, C, eps); return project(out, dout) }
		fdX, fdW := finiteDiff(x, L), finiteDiff(w, L)
		check(t, "dinp", dx, fdX, fdTol(fdX))
		check(t, "dweight", dw, fdW, fdTol(fdW))
	}
}

// With unit weight a row comes out with mean square m/(m+eps), and scaling
// the input does not change the output beyond eps's share.
func TestRefRMSNormMeanSquare(t *testing.T) {
	const C = 4
	x := []float64{1, -2, 3, 6} // mean square 12.5
	w := []float64{1, 1, 1, 1}
	out, rstd := make([]float64, C), make([]float64, 1)
	RefRMSNormForward(out, rstd, x, w, 1, C, 1e-5)
	ms := 0.0
	for _, o := range out {
		ms += o * o / C
	}
	if math.Abs(rstd[0]-1/math.Sqrt(12.5+1e-5)) > 1e-15 || math.Abs(ms-12.5/(12.5+1e-5)) > 1e-14 {
		t.Errorf("rstd %.17g, output mean square %.17g", rstd[0], ms)
	}
	big := make([]float64, C)
	for i, v := range x {
		big[i] = 1000 * v
	}
	out2 := make([]float64, C)
	RefRMSNormForward(out2, rstd, big, w, 1, C, 1e-5)
	for i := range out {
		if math.Abs(out2[i]-out[i]) > 1e-6 {
			t.Errorf("out[%d] = %g at ×1000, %g at ×1", i, out2[i], out[i])
		}
	}
}

func TestRefQKVRotaryFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const B, T, NH, KV, HD = 2, 3, 3, 1, 6
	W := (NH + 2*KV) * HD
	cos, sin := RefRotaryTable(T, HD, RefRopeInvFreq(HD, 10000))
	for _, norms := range []bool{false, true} {
		qkv, dout := refNormal(rng, B*T*W, 1), refNormal(rng, B*T*W, 1)
		var qn, kn, rstd, dqn, dkn []float64
		if norms {
			qn, kn = refNormal(rng, HD, 1), refNormal(rng, HD, 1)
			rstd, dqn, dkn = make([]float64, B*T*(NH+KV)), make([]float64, HD), make([]float64, HD)
		}
		out := make([]float64, B*T*W)
		RefQKVRotaryForward(out, rstd, qkv, qn, kn, cos, sin, B, T, NH, KV, HD, 1e-6)
		dqkv := make([]float64, B*T*W)
		RefQKVRotaryBackward(dqkv, dqn, dkn, dout, qkv, qn, kn, rstd, cos, sin, B, T, NH, KV, HD)
		L := func() float64 {
			RefQKVRotaryForward(out, rstd, qkv, qn, kn, cos, sin, B, T, NH, KV, HD, 1e-6)
			return project(out, dout)
		}
		fd := finiteDiff(qkv, L)
		check(t, "dqkv", dqkv, fd, fdTol(fd))
		if norms {
			fdQ, fdK := finiteDiff(qn, L), finiteDiff(kn, L)
			check(t, "dqnorm", dqn, fdQ, fdTol(fdQ))
			check(t, "dknorm", dkn, fdK, fdTol(fdK))
		}
	}
}

// RoPE's defining property: the rotated query at position t and key at u
// have a dot product that depends only on t − u. Position 0 is the identity,
// and every rotation keeps each (j, j+HD/2) pair's length.
func TestRefQKVRotaryRelativePosition(t *testing.T) {
	const T, HD = 9, 8
	cos, sin := RefRotaryTable(T, HD, RefRopeInvFreq(HD, 10000))
	rng := rand.New(rand.NewPCG(5, 6))
	q, k := refNormal(rng, HD, 1), refNormal(rng, HD, 1)
	// One token row per position, NH = KV = 1: [q | k | v].
	qkv := make([]float64, T*3*HD)
	for p := 0; p < T; p++ {
		copy(qkv[p*3*HD:], q)
		copy(qkv[p*3*HD+HD:], k)
	}
	out := make([]float64, T*3*HD)
	RefQKVRotaryForward(out, nil, qkv, nil, nil, cos, sin, 1, T, 1, 1, HD, 0)
	dot := func(tq, tk int) float64 {
		s := 0.0
		for i := 0; i < HD; i++ {
			s += out[tq*3*HD+i] * out[tk*3*HD+HD+i]
		}
		return s
	}
	for d := 0; d < 4; d++ {
		want := dot(d, 0)
		for u := 1; u+d < T; u++ {
			if got := dot(u+d, u); math.Abs(got-want) > 1e-12 {
				t.Errorf("q(%d)·k(%d) = %.15g, q(%d)·k(0) = %.15g", u+d, u, got, d, want)
			}
		}
	}
	for i := 0; i < 3*HD; i++ {
		if out[i] != qkv[i] {
			t.Errorf("position 0: out[%d] = %g, want %g", i, out[i], qkv[i])
		}
	}
	for p := 0; p < T; p++ {
		for j := 0; j < HD/2; j++ {
			a := math.Hypot(out[p*3*HD+j], out[p*3*HD+j+HD/2])
			b := math.Hypot(q[j], q[j+HD/2])
			if math.Abs(a-b) > 1e-12 {
				t.Errorf("position %d pair %d: length %g, want %g", p, j, a, b)
			}
		}
	}
}

func TestRefSwiGLUFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const N, I = 3, 5
	inp, dout := refNormal(rng, N*2*I, 3), refNormal(rng, N*I, 1)
	inp[0], inp[1] = -40, 40 // the tails, where e^−z overflows one way
	out, dinp := make([]float64, N*I), make([]float64, N*2*I)
	RefSwiGLUBackward(dinp, dout, inp, N, I)
	fd := finiteDiff(inp, func() float64 { RefSwiGLUForward(out, inp, N, I); return project(out, dout) })
	check(t, "dinp", dinp, fd, fdTol(fd))
}

// silu(−z) = silu(z) − z because σ(−z) = 1 − σ(z); silu(0) = 0.
func TestRefSwiGLUSiluOddPart(t *testing.T) {
	zs := []float64{0, 0.25, 1, 3, 20, 800}
	for _, z := range zs {
		inp := []float64{z, -z, 1, 1} // N = 1, I = 2: gates z, −z; ups 1
		out := make([]float64, 2)
		RefSwiGLUForward(out, inp, 1, 2)
		if math.Abs(out[1]-(out[0]-z)) > 1e-12*math.Max(1, z) {
			t.Errorf("silu(%g) = %g, silu(%g) = %g", -z, out[1], z, out[0])
		}
	}
}
