package ncclcomm

import (
	"context"
	"encoding/binary"
	"math"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/cuda/cudatest"
	"github.com/gotrain/gotrain/nccl"
)

// maxRanks is the number of mock GPUs a world has.
const maxRanks = 4

// world is maxRanks mock GPUs, each with a compute stream, and a mock NCCL
// whose ranks are goroutines of this process. Device pointers are host
// pointers, so the mock NCCL moves real data.
type world struct {
	lib      *nccl.Library
	devs     []*cuda.Device
	computes []cuda.Stream
}

func newWorld(t *testing.T, defines ...string) *world {
	t.Helper()
	t.Setenv(cudatest.EnvDevices, strconv.Itoa(maxRanks))
	drv, err := cuda.Load(cuda.Options{Library: cudatest.BuildMockDriver(t)})
	if err != nil {
		t.Fatalf("load mock driver: %v", err)
	}
	lib, err := nccl.Load(nccl.LoadOptions{Library: cudatest.BuildMockNCCL(t, defines...)})
	if err != nil {
		t.Fatalf("load mock NCCL: %v", err)
	}
	w := &world{lib: lib}
	for i := 0; i < maxRanks; i++ {
		dev, err := drv.Open(i)
		if err != nil {
			t.Fatal(err)
		}
		s, err := dev.NewStream(true)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := dev.DestroyStream(s); err != nil {
				t.Errorf("destroy compute stream %d: %v", i, err)
			}
			if err := dev.Close(); err != nil {
				t.Errorf("close device %d: %v", i, err)
			}
		})
		w.devs = append(w.devs, dev)
		w.computes = append(w.computes, s)
	}
	return w
}

// stores joins n ranks to a rendezvous store served on loopback.
func stores(t *testing.T, n int) []comm.Store {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	sts := make([]comm.Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		o := comm.RendezvousOptions{Rank: r, Size: n, Addr: "127.0.0.1", Port: port, Timeout: 10 * time.Second}
		if r == 0 {
			o.Listener = ln
		}
		wg.Go(func() { sts[r], errs[r] = comm.Rendezvous(context.Background(), o) })
	}
	wg.Wait()
	t.Cleanup(func() {
		for r := n - 1; r >= 0; r-- { // rank 0 serves the others: close it last
			if sts[r] != nil {
				sts[r].Close()
			}
		}
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rendezvous rank %d: %v", r, err)
		}
	}
	return sts
}

// options are rank r's Options on the world's devices and sts.
func (w *world) options(sts []comm.Store, r int) Options {
	return Options{Rank: r, Size: len(sts), Store: sts[r], Device: w.devs[r], Lib: w.lib,
		Timeout: 20 * time.Second, ComputeStream: w.computes[r]}
}

// comms makes the Comms of ranks 0..len(sts)-1 concurrently (New waits for
// every rank), closed at the end of the test. mod, when not nil, adjusts
// each rank's Options.
func (w *world) comms(t *testing.T, sts []comm.Store, mod func(*Options)) []*Comm {
	t.Helper()
	n := len(sts)
	cs := make([]*Comm, n)
	errs := each(n, func(r int) error {
		o := w.options(sts, r)
		if mod != nil {
			mod(&o)
		}
		var err error
		cs[r], err = New(context.Background(), o)
		return err
	})
	t.Cleanup(func() {
		for r, c := range cs {
			if c != nil {
				if err := c.Close(); err != nil {
					t.Errorf("close rank %d: %v", r, err)
				}
			}
		}
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("New rank %d: %v", r, err)
		}
	}
	return cs
}

// each runs fn for ranks 0..n-1 concurrently and returns their errors.
func each(n int, fn func(r int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Go(func() { errs[r] = fn(r) })
	}
	wg.Wait()
	return errs
}

// mustEach is each, failing the test on any rank's error.
func mustEach(t *testing.T, n int, fn func(r int) error) {
	t.Helper()
	for r, err := range each(n, fn) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// tbuf is a test's device Buffer: a view pad elements into its
// allocation, whose address the test computes itself. The pad holds
// padByte, which no collective may touch.
type tbuf struct {
	backend.Buffer
	base, ptr cuda.DevicePtr
	pad       int
}

const padByte = 0xa5

// deviceBuffer allocates pad+n elements of dt on dev, fills them with
// padByte and returns the view of the last n as a Buffer of the Device
// pool, freed at the end of the test.
func deviceBuffer(t *testing.T, dev *cuda.Device, dt backend.DType, n, pad int) tbuf {
	t.Helper()
	bytes := max((n+pad)*dt.Size(), 1)
	p, err := dev.Alloc(bytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := dev.Free(p); err != nil {
			t.Errorf("free: %v", err)
		}
	})
	if err := dev.MemsetD8(p, padByte, bytes); err != nil {
		t.Fatal(err)
	}
	mem := &backend.Memory{Dev: uintptr(p), Pool: backend.Device, Cat: backend.Comm, Bytes: bytes}
	return tbuf{
		Buffer: backend.NewBuffer(mem, dt, n+pad).Slice(pad, n),
		base:   p,
		ptr:    p + cuda.DevicePtr(pad*dt.Size()),
		pad:    pad,
	}
}

// padIntact fails the test if b's pad changed.
func padIntact(t *testing.T, dev *cuda.Device, b tbuf) {
	t.Helper()
	raw := make([]byte, b.pad*b.DType().Size())
	if len(raw) == 0 {
		return
	}
	if err := dev.CopyDtoH(raw, b.base); err != nil {
		t.Fatal(err)
	}
	for i, v := range raw {
		if v != padByte {
			t.Fatalf("byte %d before the view changed to %#x", i, v)
		}
	}
}

// put writes vals (representable in b's dtype) into b.
func put(t *testing.T, dev *cuda.Device, b tbuf, vals []float64) {
	t.Helper()
	if len(vals) != b.Len() {
		t.Fatalf("put: %d values for %d elements", len(vals), b.Len())
	}
	raw := make([]byte, b.Bytes())
	le := binary.LittleEndian
	for i, v := range vals {
		switch b.DType() {
		case backend.F32:
			le.PutUint32(raw[4*i:], math.Float32bits(float32(v)))
		case backend.BF16:
			le.PutUint16(raw[2*i:], uint16(math.Float32bits(float32(v))>>16))
		case backend.F16:
			le.PutUint16(raw[2*i:], f16Bits(t, v))
		case backend.I32:
			le.PutUint32(raw[4*i:], uint32(int32(v)))
		case backend.U16:
			le.PutUint16(raw[2*i:], uint16(v))
		}
	}
	if len(raw) > 0 {
		if err := dev.CopyHtoD(b.ptr, raw); err != nil {
			t.Fatal(err)
		}
	}
}

// get reads b back as float64, and its raw bytes.
func get(t *testing.T, dev *cuda.Device, b tbuf) ([]float64, []byte) {
	t.Helper()
	raw := make([]byte, b.Bytes())
	if len(raw) > 0 {
		if err := dev.CopyDtoH(raw, b.ptr); err != nil {
			t.Fatal(err)
		}
	}
	le := binary.LittleEndian
	out := make([]float64, b.Len())
	for i := range out {
		switch b.DType() {
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
	return out, raw
}

// f16Bits encodes v, which must be zero or a normal binary16 value with at
// most 11 significant bits.
func f16Bits(t *testing.T, v float64) uint16 {
	var sign uint16
	if math.Signbit(v) {
		sign, v = 0x8000, -v
	}
	if v == 0 {
		return sign
	}
	frac, exp := math.Frexp(v) // v = frac·2^exp, frac in [0.5, 1)
	mant := frac * 2048        // 11 significant bits
	if mant != math.Trunc(mant) || exp-1 < -14 || exp-1 > 15 {
		t.Fatalf("%v is not a normal binary16 value", v)
	}
	return sign | uint16(exp-1+15)<<10 | uint16(mant)&0x3ff
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

// precision is the number of significant bits of a float dtype.
func precision(dt backend.DType) int {
	switch dt {
	case backend.BF16:
		return 8
	case backend.F16:
		return 11
	}
	return 24
}

// near reports whether got is ref rounded to dt: within one unit in the
// last place of dt at ref's magnitude (NCCL may round more than once).
func near(got, ref float64, dt backend.DType) bool {
	if !dt.IsFloat() {
		return got == ref
	}
	if ref == 0 {
		return got == 0
	}
	_, e := math.Frexp(ref)
	return math.Abs(got-ref) <= math.Ldexp(1, e-precision(dt))
}

// randomVals returns n values k/64 with k in [-128, 128]: exact in every
// float dtype (integers for I32 and U16), so every rank's input is exact
// and only the result rounds.
func randomVals(r interface{ IntN(int) int }, n int, dt backend.DType) []float64 {
	v := make([]float64, n)
	for i := range v {
		switch dt {
		case backend.I32:
			v[i] = float64(r.IntN(2001) - 1000)
		case backend.U16:
			v[i] = float64(r.IntN(65536))
		default:
			v[i] = float64(r.IntN(257)-128) / 64
		}
	}
	return v
}
