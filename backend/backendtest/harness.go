package backendtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// harness gives one subtest a fresh backend, a seeded RNG and helpers that
// move float64 test data in and out of Buffers. Buffers it allocates are
// freed when the subtest ends.
type harness struct {
	t   *testing.T
	be  backend.Backend
	rng *rand.Rand
}

func newHarness(t *testing.T, newBackend func(*testing.T) backend.Backend, seed uint64) *harness {
	t.Helper()
	return &harness{t: t, be: newBackend(t), rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))}
}

// alloc returns n zeroed elements of dt in the device pool.
func (h *harness) alloc(dt backend.DType, n int) backend.Buffer {
	h.t.Helper()
	b, err := h.be.Alloc(backend.Device, backend.Activations, dt, n)
	if err != nil {
		h.t.Fatalf("alloc %d %s: %v", n, dt, err)
	}
	h.t.Cleanup(func() { h.be.Free(b) })
	return b
}

// put uploads vals into a new buffer of dt and returns it with the values it
// actually holds (vals rounded to dt by the independent reference rounding).
func (h *harness) put(dt backend.DType, vals []float64) (backend.Buffer, []float64) {
	h.t.Helper()
	b := h.alloc(dt, len(vals))
	f := make([]float32, len(vals))
	held := make([]float64, len(vals))
	for i, v := range vals {
		f[i] = float32(v)
		held[i] = float64(roundTo(dt, f[i]))
	}
	if err := backend.WriteF32(h.be, b, f); err != nil {
		h.t.Fatalf("upload: %v", err)
	}
	return b, held
}

// putInts uploads int32 values into a new I32 buffer.
func (h *harness) putInts(vals []int32) backend.Buffer {
	h.t.Helper()
	b := h.alloc(backend.I32, len(vals))
	if err := backend.WriteI32(h.be, b, vals); err != nil {
		h.t.Fatalf("upload ints: %v", err)
	}
	return b
}

// get downloads b as float64.
func (h *harness) get(b backend.Buffer) []float64 {
	h.t.Helper()
	if err := h.be.Sync(); err != nil {
		h.t.Fatalf("sync: %v", err)
	}
	f, err := backend.ReadF32(h.be, b)
	if err != nil {
		h.t.Fatalf("download: %v", err)
	}
	out := make([]float64, len(f))
	for i, v := range f {
		out[i] = float64(v)
	}
	return out
}

// normal returns n draws of N(0, sd²).
func (h *harness) normal(n int, sd float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = h.rng.NormFloat64() * sd
	}
	return v
}

// ids returns n token ids in [0, max).
func (h *harness) ids(n, max int) []int32 {
	v := make([]int32, n)
	for i := range v {
		v[i] = int32(h.rng.IntN(max))
	}
	return v
}

// roundTo is x as stored in dt.
func roundTo(dt backend.DType, x float32) float32 {
	switch dt {
	case backend.BF16:
		return RefBF16(x)
	case backend.F16:
		return RefF16(x)
	}
	return x
}

// tol is the llm.c-style acceptance rule: |got − want| ≤ abs + rel·|want|,
// plus elem[i] for element i when elem is set (a bound that differs by
// element, such as the error an intermediate rounding allows).
type tol struct {
	abs, rel float64
	elem     []float64
}

// relFor is the relative error a result stored in dt may carry beyond fp32
// compute error: one rounding to dt (half an ulp) with margin.
func relFor(dt backend.DType) float64 {
	switch dt {
	case backend.BF16:
		return 1.0 / 256 // half ulp is 2^-9
	case backend.F16:
		return 1.0 / 1024 // half ulp is 2^-12; 16-bit inputs are exact, so margin covers fp32 compute only
	}
	return 0
}

// absFor is the absolute error a result stored in dt may carry from
// rounding: fp16's subnormal step is 2^-24, so tiny results (a probability
// times 1/(B·T)) are quantised to it whatever their relative accuracy.
func absFor(dt backend.DType) float64 {
	if dt == backend.F16 {
		return 0x1p-24
	}
	return 0
}

// tolFor is the tolerance for a result stored in dt whose fp32 computation
// is accurate to about fp32rel of the result's scale (rms).
func tolFor(dt backend.DType, want []float64, fp32rel float64) tol {
	return tol{abs: fp32rel*rms(want) + absFor(dt), rel: fp32rel + relFor(dt)}
}

func rms(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s / float64(len(v)))
}

// check fails the test unless every got[i] is within tl of want[i], listing
// the worst offenders.
func check(t *testing.T, name string, got, want []float64, tl tol) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	type bad struct {
		i         int
		got, want float64
		excess    float64
	}
	var bads []bad
	for i := range got {
		lim := tl.abs + tl.rel*math.Abs(want[i])
		if tl.elem != nil {
			lim += tl.elem[i]
		}
		d := math.Abs(got[i] - want[i])
		if !(d <= lim) { // also catches NaN
			bads = append(bads, bad{i, got[i], want[i], d / math.Max(lim, 1e-300)})
		}
	}
	if len(bads) == 0 {
		return
	}
	sort.Slice(bads, func(a, b int) bool { return bads[a].excess > bads[b].excess })
	var sb strings.Builder
	for _, b := range bads[:min(5, len(bads))] {
		fmt.Fprintf(&sb, "\n  [%d] got %.9g want %.9g (%.3gx tolerance)", b.i, b.got, b.want, b.excess)
	}
	t.Errorf("%s: %d of %d values out of tolerance (abs %.3g, rel %.3g):%s", name, len(bads), len(got), tl.abs, tl.rel, sb.String())
}

// project is L = Σ out·R, the scalar whose gradient backward ops compute when
// dout = R.
func project(out, R []float64) float64 {
	s := 0.0
	for i, o := range out {
		s += o * R[i]
	}
	return s
}

// finiteDiff returns dL/dx by central differences, perturbing each x[i] in
// place (and restoring it); L reads x.
func finiteDiff(x []float64, L func() float64) []float64 {
	g := make([]float64, len(x))
	for i, orig := range x {
		step := 1e-5 * math.Max(1, math.Abs(orig))
		x[i] = orig + step
		lp := L()
		x[i] = orig - step
		lm := L()
		x[i] = orig
		g[i] = (lp - lm) / (2 * step)
	}
	return g
}

// fdTol compares a float64 analytic gradient to central differences, whose
// error (≈1e-10 truncation plus 1e-11·|L| round-off) is far below it.
func fdTol(want []float64) tol { return tol{abs: 1e-7 * math.Max(rms(want), 1e-3), rel: 1e-6} }

// add returns a+b elementwise as a new slice.
func add(a, b []float64) []float64 {
	s := make([]float64, len(a))
	for i := range a {
		s[i] = a[i] + b[i]
	}
	return s
}

// same fails unless got and want hold the same bits, element by element
// (values read back from float buffers, so -0 and +0 differ): the same op
// on the same inputs must give the same bits whatever optional outputs it
// was also asked for, in place or not.
func same(t *testing.T, name string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	bad := 0
	for i := range got {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			if bad < 3 {
				t.Errorf("%s: [%d] = %.9g, want %.9g", name, i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values differ", name, bad, len(got))
	}
}
