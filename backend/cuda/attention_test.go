package cuda

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/compare"
)

// upload puts vals into a new device buffer of dt on be.
func upload(t *testing.T, be backend.Backend, dt backend.DType, vals []float32) backend.Buffer {
	t.Helper()
	x, err := be.Alloc(backend.Device, backend.Activations, dt, len(vals))
	if err != nil {
		t.Fatal(err)
	}
	if err := backend.WriteF32(be, x, vals); err != nil {
		t.Fatal(err)
	}
	return x
}

func download(t *testing.T, be backend.Backend, x backend.Buffer) []float32 {
	t.Helper()
	v, err := backend.ReadF32(be, x)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// agree requires |got − want| ≤ tol·(rms(want) + |want|) elementwise.
func agree(t *testing.T, name string, got, want []float32, tol float64) {
	t.Helper()
	var ss float64
	for _, w := range want {
		ss += float64(w) * float64(w)
	}
	rms := math.Sqrt(ss / float64(max(len(want), 1)))
	bad := 0
	for i := range want {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if !(d <= tol*(rms+math.Abs(float64(want[i])))) {
			if bad < 5 {
				t.Errorf("%s[%d]: gpu %g, cpu %g", name, i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements differ", name, bad, len(want))
	}
}

func normals(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// A head size above the kernels' 256-column register chunk (HD = 300)
// takes the chunked path of every weighted row sum, here with two query
// heads sharing one key/value head; the results still match the CPU
// backend, and a second run gives the same bits (no atomics, fixed
// summation order).
func TestAttentionWideHeadsMatchCPUAndRepeat(t *testing.T) {
	e := newEnv(t)
	const B, T, NH, KV, HD = 1, 6, 2, 1, 300
	nqkv, nout := B*T*(NH+2*KV)*HD, B*T*NH*HD
	for _, dt := range []backend.DType{backend.F32, backend.BF16} {
		g, c := e.backend(t), newHost()
		r := rand.New(rand.NewPCG(4, uint64(dt)))
		qkvV, doutV := normals(r, nqkv), normals(r, nout)
		run := func(be backend.Backend) (out, lse, dqkv backend.Buffer) {
			qkv, dout := upload(t, be, dt, qkvV), upload(t, be, dt, doutV)
			out = upload(t, be, dt, make([]float32, nout))
			lse = upload(t, be, backend.F32, make([]float32, B*NH*T))
			dqkv = upload(t, be, dt, make([]float32, nqkv))
			be.AttentionForward(out, lse, qkv, B, T, NH, KV, HD)
			be.AttentionBackward(dqkv, dout, out, qkv, lse, B, T, NH, KV, HD)
			if err := be.Sync(); err != nil {
				t.Fatal(err)
			}
			return out, lse, dqkv
		}
		gOut, gLse, gD := run(g)
		cOut, cLse, cD := run(c)
		agree(t, dt.String()+" out", download(t, g, gOut), download(t, c, cOut), compare.Tol(dt))
		agree(t, "lse", download(t, g, gLse), download(t, c, cLse), compare.Tol(backend.F32))
		agree(t, dt.String()+" dqkv", download(t, g, gD), download(t, c, cD), compare.Tol(dt))

		_, _, again := run(g)
		first, second := make([]byte, gD.Bytes()), make([]byte, again.Bytes())
		if err := g.Download(first, gD); err != nil {
			t.Fatal(err)
		}
		if err := g.Download(second, again); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, second) {
			t.Errorf("%s: two runs of attention backward differ in their bits", dt)
		}
	}
}
