package commtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
)

// callTimeout is the default timeout of the worlds whose calls should all
// succeed: long enough for a loaded machine, short enough that a hang
// fails the test in reasonable time.
const callTimeout = 20 * time.Second

// world is one subtest's ranks, with helpers that move float64 test data in
// and out of guarded Buffers. Buffers are allocated, filled and read on the
// test goroutine while no collective runs, since a Backend serves one
// goroutine at a time.
type world struct {
	t     *testing.T
	o     Options
	ranks []Rank
}

// world starts a world of size ranks whose calls time out after timeout,
// and checks that every rank knows its place.
func (s *suite) world(t *testing.T, size int, timeout time.Duration) *world {
	t.Helper()
	ranks := s.newWorld(t, size, timeout)
	if len(ranks) != size {
		t.Fatalf("asked for a world of %d ranks, got %d", size, len(ranks))
	}
	for r, rk := range ranks {
		if rk.Comm.Rank() != r || rk.Comm.Size() != size {
			t.Fatalf("rank %d's Comm says rank %d of %d, want %d of %d", r, rk.Comm.Rank(), rk.Comm.Size(), r, size)
		}
	}
	return &world{t: t, o: s.o, ranks: ranks}
}

func (w *world) size() int { return len(w.ranks) }

func (w *world) comm(r int) comm.Comm { return w.ranks[r].Comm }

// guard is how many elements on each side of a test Buffer's view hold
// guardByte: a collective on the view must not change them.
const (
	guard     = 3
	guardByte = 0xa5
)

// buf is a Buffer under test, a view guard elements into its allocation.
// A collective may change the bytes [lo, hi) of the allocation (the view,
// or for an in-place call the larger view it lies in) and no others.
type buf struct {
	backend.Buffer
	whole  backend.Buffer
	be     backend.Backend
	lo, hi int
}

// part is the view of n elements at element off of b, for in-place calls:
// a collective on it may still change all of b.
func (b buf) part(off, n int) buf {
	p := b
	p.Buffer = b.Slice(off, n)
	return p
}

// alloc returns a guarded view of n elements of dt on rank r, its elements
// and guards all guardByte, freed when the test ends.
func (w *world) alloc(r int, dt backend.DType, n int) buf {
	w.t.Helper()
	be := w.ranks[r].Backend
	whole, err := be.Alloc(backend.Device, backend.Comm, dt, n+2*guard)
	if err != nil {
		w.t.Fatalf("rank %d: allocate %d %s: %v", r, n+2*guard, dt, err)
	}
	w.t.Cleanup(func() { be.Free(whole) })
	if err := be.Upload(whole, bytes.Repeat([]byte{guardByte}, whole.Bytes())); err != nil {
		w.t.Fatalf("rank %d: fill %s: %v", r, whole, err)
	}
	v := whole.Slice(guard, n)
	return buf{Buffer: v, whole: whole, be: be, lo: v.ByteOff(), hi: v.ByteOff() + v.Bytes()}
}

// put writes vals, which dt must hold exactly, into b.
func (w *world) put(b buf, vals []float64) {
	w.t.Helper()
	if err := b.be.Upload(b.Buffer, encode(w.t, b.DType(), vals)); err != nil {
		w.t.Fatalf("upload %s: %v", b.Buffer, err)
	}
}

// filled allocates a guarded view on rank r holding vals.
func (w *world) filled(r int, dt backend.DType, vals []float64) buf {
	w.t.Helper()
	b := w.alloc(r, dt, len(vals))
	w.put(b, vals)
	return b
}

// get reads b's values and raw bytes, and fails the test if a collective
// wrote outside the view.
func (w *world) get(what string, b buf) ([]float64, []byte) {
	w.t.Helper()
	whole := make([]byte, b.whole.Bytes())
	if err := b.be.Download(whole, b.whole); err != nil {
		w.t.Fatalf("%s: download %s: %v", what, b.whole, err)
	}
	for i, v := range whole {
		if (i < b.lo || i >= b.hi) && v != guardByte {
			w.t.Fatalf("%s: byte %d of the allocation, outside the view of bytes [%d, %d), changed to %#x",
				what, i, b.lo, b.hi, v)
		}
	}
	raw := whole[b.ByteOff() : b.ByteOff()+b.Bytes()]
	return decode(b.DType(), raw), raw
}

// each runs f on every rank at once and fails the test with the first
// error, naming what was run.
func (w *world) each(what string, f func(r int) error) {
	w.t.Helper()
	if err := FirstErr(OnEveryRank(w.size(), f)); err != nil {
		w.t.Fatalf("%s: %v", what, err)
	}
}

// healthy fails the test unless a barrier on every rank succeeds.
func (w *world) healthy(after string) {
	w.t.Helper()
	w.each("a barrier after "+after, func(r int) error { return w.comm(r).Barrier(context.Background()) })
}

// encode converts vals to dt's little-endian bytes. Every value must be
// exact in dt: the suite's inputs are, so conversion never rounds and the
// reference sees what the Comm sees.
func encode(t *testing.T, dt backend.DType, vals []float64) []byte {
	t.Helper()
	raw := make([]byte, len(vals)*dt.Size())
	le := binary.LittleEndian
	for i, v := range vals {
		if !exactIn(dt, v) {
			t.Fatalf("test value %v is not exact in %s", v, dt)
		}
		switch dt {
		case backend.F32:
			le.PutUint32(raw[4*i:], math.Float32bits(float32(v)))
		case backend.BF16:
			le.PutUint16(raw[2*i:], uint16(math.Float32bits(float32(v))>>16))
		case backend.F16:
			le.PutUint16(raw[2*i:], f16Bits(v))
		case backend.I32:
			le.PutUint32(raw[4*i:], uint32(int32(v)))
		case backend.U16:
			le.PutUint16(raw[2*i:], uint16(v))
		default:
			t.Fatalf("no encoding for %s", dt)
		}
	}
	return raw
}

// exactIn reports whether dt holds v exactly (NaN counts, for the float
// dtypes).
func exactIn(dt backend.DType, v float64) bool {
	switch dt {
	case backend.I32:
		return v == math.Trunc(v) && v >= math.MinInt32 && v <= math.MaxInt32
	case backend.U16:
		return v == math.Trunc(v) && v >= 0 && v <= math.MaxUint16
	}
	return math.IsNaN(v) || roundTo(dt, v) == v
}

// decode converts dt's little-endian bytes to float64, exactly.
func decode(dt backend.DType, raw []byte) []float64 {
	le := binary.LittleEndian
	out := make([]float64, len(raw)/dt.Size())
	for i := range out {
		switch dt {
		case backend.F32:
			out[i] = float64(math.Float32frombits(le.Uint32(raw[4*i:])))
		case backend.BF16:
			out[i] = float64(math.Float32frombits(uint32(le.Uint16(raw[2*i:])) << 16))
		case backend.F16:
			out[i] = f16Value(le.Uint16(raw[2*i:]))
		case backend.I32:
			out[i] = float64(int32(le.Uint32(raw[4*i:])))
		case backend.U16:
			out[i] = float64(le.Uint16(raw[2*i:]))
		}
	}
	return out
}

// f16Bits encodes v, which is NaN or exact in binary16.
func f16Bits(v float64) uint16 {
	if math.IsNaN(v) {
		return 0x7e00
	}
	var sign uint16
	if math.Signbit(v) {
		sign, v = 0x8000, -v
	}
	switch {
	case v == 0:
		return sign
	case math.IsInf(v, 0):
		return sign | 0x7c00
	case v < 0x1p-14: // subnormal: a multiple of 2^-24
		return sign | uint16(v*0x1p24)
	}
	frac, exp := math.Frexp(v) // v = frac·2^exp, frac in [0.5, 1)
	return sign | uint16(exp-1+15)<<10 | uint16(frac*2048)&0x3ff
}

// f16Value decodes a binary16 value.
func f16Value(h uint16) float64 {
	e, m := int(h>>10&31), float64(h&0x3ff)
	var v float64
	switch e {
	case 0:
		v = math.Ldexp(m, -24)
	case 31:
		v = math.Inf(1)
		if m != 0 {
			v = math.NaN()
		}
	default:
		v = math.Ldexp(1024+m, e-25)
	}
	if h&0x8000 != 0 {
		v = -v
	}
	return v
}

// describe names a buffer's shape for messages.
func describe(dt backend.DType, n int) string { return fmt.Sprintf("%d %s", n, dt) }
