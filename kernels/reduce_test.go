package kernels_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gotrain/gotrain/kernels"
	"github.com/gotrain/gotrain/kernels/emu"
)

// gt_sum_squares leaves one float64 partial per block. On a grid smaller
// than the data (threads loop grid-stride over packs) each partial must be
// the sum over exactly the elements its block visits, computed here in float64 on
// the values as stored (bf16 bit patterns widened exactly).
func TestSumSquaresPartialsPerBlock(t *testing.T) {
	lib := emu.ForTest(t)
	r := rand.New(rand.NewPCG(2, 9))
	const n, blocks, threads = 15000, 3, 256
	x := emu.Alloc(2 * n)
	defer x.Free()
	raw := x.Bytes()
	vals := make([]float64, n)
	for i := range vals {
		bits := math.Float32bits(float32(r.NormFloat64()*4)) >> 16
		raw[2*i], raw[2*i+1] = byte(bits), byte(bits>>8)
		vals[i] = float64(math.Float32frombits(bits << 16))
	}
	parts := emu.Alloc(8 * blocks)
	defer parts.Free()
	if err := lib.Launch("gt_sum_squares", emu.Dim{X: blocks}, emu.Dim{X: threads},
		parts, x, int32(kernels.BF16), int64(n)); err != nil {
		t.Fatal(err)
	}
	// A thread takes a pack of 8 elements, so block b's grid-stride loop
	// covers the runs of threads·8 elements starting at b·threads·8, every
	// blocks·threads·8.
	const pack = 8
	for b, got := range parts.Float64s() {
		var want float64
		for i := b * threads * pack; i < n; i += blocks * threads * pack {
			for j := i; j < min(i+threads*pack, n); j++ {
				want += vals[j] * vals[j]
			}
		}
		if math.Abs(got-want) > 1e-13*want {
			t.Errorf("block %d: partial %.17g, want %.17g", b, got, want)
		}
	}
}

// gt_nonfinite raises the flag for a NaN or an Inf anywhere, also in the
// part of the data a grid-stride loop reaches last, and for fp16 and bf16
// bit patterns; the largest finite values and zeros do not raise it.
func TestNonFiniteFlag(t *testing.T) {
	lib := emu.ForTest(t)
	const n = 3000
	cases := []struct {
		name      string
		dt        kernels.DType
		big, bad  uint32
		wantFlag  bool
		badAtLast bool
	}{
		{"f32 max", kernels.F32, 0x7f7fffff, 0x7f7fffff, false, false},
		{"f32 inf", kernels.F32, 0x7f7fffff, 0xff800000, true, true},
		{"f32 nan", kernels.F32, 0, 0x7fc00001, true, false},
		{"bf16 max", kernels.BF16, 0x7f7f, 0xff7f, false, true},
		{"bf16 nan", kernels.BF16, 0x7f7f, 0x7fc1, true, true},
		{"f16 max", kernels.F16, 0x7bff, 0xfbff, false, true},
		{"f16 inf", kernels.F16, 0x7bff, 0x7c00, true, true},
		{"f16 nan", kernels.F16, 0, 0xfe01, true, false},
	}
	for _, c := range cases {
		x := emu.Alloc(c.dt.Size() * n)
		raw := x.Bytes()
		put := func(i int, v uint32) {
			for k := 0; k < c.dt.Size(); k++ {
				raw[i*c.dt.Size()+k] = byte(v >> (8 * k))
			}
		}
		for i := 0; i < n; i += 2 {
			put(i, c.big)
		}
		pos := 17
		if c.badAtLast {
			pos = n - 1
		}
		put(pos, c.bad)
		flag := emu.Alloc(4)
		if err := lib.Launch("gt_nonfinite", emu.Dim{X: 2}, emu.Dim{X: 256}, flag, x, int32(c.dt), int64(n)); err != nil {
			t.Fatal(err)
		}
		if got := flag.Int32s()[0] != 0; got != c.wantFlag {
			t.Errorf("%s: flag %v, want %v", c.name, got, c.wantFlag)
		}
		x.Free()
		flag.Free()
	}
}
