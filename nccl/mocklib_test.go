package nccl

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"sync"
	"testing"

	"github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/cuda/cudatest"
)

// maxRanks is the number of mock GPUs a world has.
const maxRanks = 4

// world is maxRanks mock GPUs, one stream on each, and a mock NCCL loaded
// through $GOTRAIN_LIBNCCL. Device pointers are host pointers, so the mock
// NCCL moves real data between the ranks, which are goroutines, each on
// its device's thread.
type world struct {
	lib     *Library
	devs    []*cuda.Device
	streams []cuda.Stream
}

func newWorld(t *testing.T, defines ...string) *world {
	t.Helper()
	t.Setenv(cudatest.EnvDevices, strconv.Itoa(maxRanks))
	drv, err := cuda.Load(cuda.Options{Library: cudatest.BuildMockDriver(t)})
	if err != nil {
		t.Fatalf("load mock driver: %v", err)
	}
	t.Setenv(EnvLibrary, cudatest.BuildMockNCCL(t, defines...))
	lib, err := Load(LoadOptions{})
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
			_ = dev.DestroyStream(s)
			if err := dev.Close(); err != nil {
				t.Errorf("close device %d: %v", i, err)
			}
		})
		w.devs = append(w.devs, dev)
		w.streams = append(w.streams, s)
	}
	return w
}

// each runs fn for ranks 0..n-1 concurrently, each inside its device's Do,
// and returns every rank's error.
func (w *world) each(n int, fn func(r int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = w.devs[r].Do(func(*cuda.Ctx) error { return fn(r) })
		}()
	}
	wg.Wait()
	return errs
}

// mustEach is each, failing the test on any rank's error.
func (w *world) mustEach(t *testing.T, n int, fn func(r int) error) {
	t.Helper()
	for r, err := range w.each(n, fn) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// comms makes a communicator of ranks 0..n-1 (one new unique id), closed
// at the end of the test.
func (w *world) comms(t *testing.T, n int) []*Comm {
	t.Helper()
	id, err := w.lib.UniqueID()
	if err != nil {
		t.Fatal(err)
	}
	cs := make([]*Comm, n)
	w.mustEach(t, n, func(r int) error {
		var err error
		cs[r], err = w.lib.CommInitRank(n, id, r)
		return err
	})
	t.Cleanup(func() {
		for r, c := range cs {
			if err := c.Close(); err != nil && !errors.Is(err, ErrClosed) {
				t.Errorf("close rank %d: %v", r, err)
			}
		}
	})
	return cs
}

// sync waits for rank r's stream.
func (w *world) sync(t *testing.T, r int) {
	t.Helper()
	if err := w.devs[r].StreamSynchronize(w.streams[r]); err != nil {
		t.Fatal(err)
	}
}

// buffer is one rank's device buffer of float64 test values, stored as dt.
type buffer struct {
	ptr cuda.DevicePtr
	n   int
	dt  DataType
}

// put allocates a device buffer on dev holding vals in type dt (bf16
// values must already be representable).
func put(t *testing.T, dev *cuda.Device, vals []float64, dt DataType) buffer {
	t.Helper()
	var raw []byte
	switch dt {
	case Float32:
		f := make([]float32, len(vals))
		for i, v := range vals {
			f[i] = float32(v)
		}
		raw = cuda.Bytes(f)
	case Bfloat16:
		h := make([]uint16, len(vals))
		for i, v := range vals {
			h[i] = uint16(math.Float32bits(float32(v)) >> 16)
		}
		raw = cuda.Bytes(h)
	case Int32:
		x := make([]int32, len(vals))
		for i, v := range vals {
			x[i] = int32(v)
		}
		raw = cuda.Bytes(x)
	case Float64:
		raw = cuda.Bytes(append([]float64(nil), vals...))
	default:
		t.Fatalf("put: type %v", dt)
	}
	p, err := dev.Alloc(max(len(raw), 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dev.Free(p) })
	if len(raw) > 0 {
		if err := dev.CopyHtoD(p, raw); err != nil {
			t.Fatal(err)
		}
	}
	return buffer{ptr: p, n: len(vals), dt: dt}
}

// get reads b back as float64.
func get(t *testing.T, dev *cuda.Device, b buffer) []float64 {
	t.Helper()
	raw := make([]byte, b.n*b.dt.Size())
	if len(raw) > 0 {
		if err := dev.CopyDtoH(raw, b.ptr); err != nil {
			t.Fatal(err)
		}
	}
	le := binary.LittleEndian
	out := make([]float64, b.n)
	for i := range out {
		switch b.dt {
		case Float32:
			out[i] = float64(math.Float32frombits(le.Uint32(raw[4*i:])))
		case Bfloat16:
			out[i] = float64(math.Float32frombits(uint32(le.Uint16(raw[2*i:])) << 16))
		case Int32:
			out[i] = float64(int32(le.Uint32(raw[4*i:])))
		case Float64:
			out[i] = math.Float64frombits(le.Uint64(raw[8*i:]))
		}
	}
	return out
}

// refBF16 rounds x to bfloat16 (8 significant bits, nearest, ties to even)
// by arithmetic on the significand.
func refBF16(x float64) float64 {
	if x == 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	f, e := math.Frexp(x)
	return math.Ldexp(math.RoundToEven(f*256), e-8)
}

// randomVals returns n values in [-2, 2) representable in dt (integers for
// Int32).
func randomVals(r interface{ Float64() float64 }, n int, dt DataType) []float64 {
	v := make([]float64, n)
	for i := range v {
		x := r.Float64()*4 - 2
		switch dt {
		case Bfloat16:
			x = refBF16(x)
		case Float32:
			x = float64(float32(x))
		case Int32:
			x = math.Floor(x * 50)
		}
		v[i] = x
	}
	return v
}
