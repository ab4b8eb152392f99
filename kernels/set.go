package kernels

import (
	"fmt"

	"github.com/gotrain/gotrain/cuda"
)

// DType is a storage type code as the kernels receive it; the values are
// backend.DType's (the CUDA backend's tests check that they agree).
type DType int32

const (
	F32  DType = 1
	BF16 DType = 2
	F16  DType = 3
	I32  DType = 4
	U16  DType = 5
)

// Size is the element size in bytes.
func (d DType) Size() int {
	if d == BF16 || d == F16 || d == U16 {
		return 2
	}
	return 4
}

// Tensor is a device array as a launcher passes it: the address of its
// first element and its storage type. Kernels take both, so one kernel
// serves every mix of fp32, bf16 and fp16 storage.
type Tensor struct {
	Ptr cuda.DevicePtr
	DT  DType
}

// Set is the whole kernel program loaded on one device, with every kernel
// looked up once. Its typed launchers (one per kernel, in the launch_*.go
// files) queue work on the stream they are given and return launch errors;
// failures while a kernel runs surface at the next synchronisation. A Set
// is safe for concurrent use: launches go through the device's thread.
type Set struct {
	dev *cuda.Device
	mod *Module
	fns map[string]cuda.Function
	// sink, when set (DeferLaunches), receives launch failures and
	// launches go through cuda.Device.Enqueue.
	sink func(error)
}

// DeferLaunches makes later launches skip their own trip to the device
// thread (cuda.Device.LaunchDeferred): they are batched into the next
// job, so a layer's launches cross goroutines once, and a launch failure
// goes to sink instead of the launcher's result. Call it before sharing
// the Set.
func (s *Set) DeferLaunches(sink func(error)) { s.sink = sink }

// LoadSet compiles Program for dev (through c's cache) and loads it.
func LoadSet(c *Compiler, dev *cuda.Device) (*Set, error) {
	mod, err := c.Load(dev, Program(), ProgramName)
	if err != nil {
		return nil, err
	}
	s := &Set{dev: dev, mod: mod, fns: make(map[string]cuda.Function)}
	for _, name := range KernelNames() {
		f, err := mod.Function(name)
		if err != nil {
			_ = mod.Unload()
			return nil, fmt.Errorf("kernels: look up %s: %w", name, err)
		}
		s.fns[name] = f
	}
	return s, nil
}

// Device is the device the Set is loaded on.
func (s *Set) Device() *cuda.Device { return s.dev }

// Image is the compiled program that was loaded.
func (s *Set) Image() Image { return s.mod.Image() }

// Close unloads the program.
func (s *Set) Close() error { return s.mod.Unload() }

// launch queues kernel name on st with a grid of grid blocks of block
// threads (one-dimensional) and the kernel's arguments in order.
func (s *Set) launch(name string, st cuda.Stream, grid, block int, args ...any) error {
	return s.launch3(name, st, cuda.Dim3{X: uint32(grid)}, cuda.Dim3{X: uint32(block)}, args...)
}

// launch3 is launch with full grid and block shapes.
func (s *Set) launch3(name string, st cuda.Stream, grid, block cuda.Dim3, args ...any) error {
	f, ok := s.fns[name]
	if !ok {
		panic("kernels: launch of unknown kernel " + name) // a launcher naming a kernel the sources lack
	}
	if grid.X == 0 || grid.Y > 65535 || grid.Z > 65535 {
		return fmt.Errorf("kernels: %s: grid %dx%dx%d out of range", name, grid.X, grid.Y, grid.Z)
	}
	cfg := cuda.LaunchConfig{Grid: grid, Block: block, Stream: st}
	if s.sink != nil {
		s.dev.LaunchDeferred(s.sink, f, cfg, args...)
		return nil
	}
	return s.dev.Launch(f, cfg, args...)
}

// blocksFor is the number of blocks of size block covering n threads,
// capped so that grid-stride loops cover the rest.
func blocksFor(n, block int) int {
	const maxBlocks = 65535 * 16
	b := (n + block - 1) / block
	if b < 1 {
		b = 1
	}
	if b > maxBlocks {
		b = maxBlocks
	}
	return b
}
