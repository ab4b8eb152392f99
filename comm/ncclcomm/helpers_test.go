package ncclcomm

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/comm/commtest"
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

// options are rank r's Options on the world's devices and store st.
func (w *world) options(st comm.Store, r int) Options {
	return Options{Rank: r, Size: st.Size(), Store: st, Device: w.devs[r], Lib: w.lib,
		Timeout: 20 * time.Second, ComputeStream: w.computes[r]}
}

// ranks starts size ranks on the world's first devices, each with its own
// loopback store client and its GPU's memory as Backend, and closes them
// when the test ends. mod, when not nil, adjusts each rank's Options.
func (w *world) ranks(t *testing.T, size int, mod func(*Options)) []commtest.Rank {
	t.Helper()
	return commtest.NewWorld(t, size, func(ctx context.Context, st comm.Store, r, size int) (comm.Comm, backend.Backend, error) {
		o := w.options(st, r)
		if mod != nil {
			mod(&o)
		}
		c, err := New(ctx, o)
		return c, &deviceMemory{tb: t, dev: w.devs[r]}, err
	})
}

// deviceMemory is a rank's Backend in these tests: Device-pool Buffers in
// its mock GPU's memory, moved with the driver's copies, which is all a
// Comm and its tests use. It runs no ops: the embedded Backend is nil, so
// calling one panics.
type deviceMemory struct {
	backend.Backend
	tb  testing.TB
	dev *cuda.Device
}

func (m *deviceMemory) Name() string { return "mock GPU memory" }

func (m *deviceMemory) Alloc(pool backend.Pool, cat backend.Category, dt backend.DType, n int) (backend.Buffer, error) {
	if pool != backend.Device {
		return backend.Buffer{}, fmt.Errorf("the mock GPU's memory has no %s pool", pool)
	}
	bytes := max(n*dt.Size(), 1)
	p, err := m.dev.Alloc(bytes)
	if err != nil {
		return backend.Buffer{}, err
	}
	if err := m.dev.MemsetD8(p, 0, bytes); err != nil {
		return backend.Buffer{}, err
	}
	return backend.NewBuffer(&backend.Memory{Dev: uintptr(p), Pool: pool, Cat: cat, Bytes: bytes}, dt, n), nil
}

func (m *deviceMemory) Free(b backend.Buffer) {
	if err := m.dev.Free(cuda.DevicePtr(b.Mem().Dev)); err != nil {
		m.tb.Errorf("free %s: %v", b, err)
	}
	b.Mem().Freed = true
}

func (m *deviceMemory) Upload(dst backend.Buffer, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return m.dev.CopyHtoD(cuda.DevicePtr(dst.Mem().Dev).Add(dst.ByteOff()), src)
}

func (m *deviceMemory) Download(dst []byte, src backend.Buffer) error {
	if len(dst) == 0 {
		return nil
	}
	return m.dev.CopyDtoH(dst, cuda.DevicePtr(src.Mem().Dev).Add(src.ByteOff()))
}

// f32s allocates n zeroed fp32 elements on every rank.
func f32s(t *testing.T, ranks []commtest.Rank, n int) []backend.Buffer {
	t.Helper()
	bs := make([]backend.Buffer, len(ranks))
	for r, rk := range ranks {
		b, err := rk.Backend.Alloc(backend.Device, backend.Comm, backend.F32, n)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rk.Backend.Free(b) })
		bs[r] = b
	}
	return bs
}
