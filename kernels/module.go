package kernels

import (
	"fmt"

	"github.com/gotrain/gotrain/cuda"
)

// Module is compiled kernel code loaded on one device. Its methods run on
// the device's thread and are safe for concurrent use.
type Module struct {
	dev *cuda.Device
	mod cuda.Module
	img Image
}

// Load compiles src (see Build) for dev's compute capability and loads it
// there. If the driver refuses the CUBIN (a driver older than NVRTC, say),
// the PTX for the same device is tried before giving up; the error then
// reports both attempts.
func (c *Compiler) Load(dev *cuda.Device, src, name string, opts ...string) (*Module, error) {
	arch := SM(dev.Info().SM())
	img, err := c.Build(src, name, arch, opts...)
	if err != nil {
		return nil, err
	}
	mod, err := dev.LoadModule(img.Data)
	if err == nil {
		return &Module{dev: dev, mod: mod, img: img}, nil
	}
	hint := newerThanDriverHint(c.nvrtc.major, dev.Driver().Version())
	if img.Kind != CUBIN {
		return nil, fmt.Errorf("kernels: load %s (%s %s) on device %d: %w%s", name, img.Kind, img.Arch, dev.Info().Ordinal, err, hint)
	}
	cubinErr := err
	ptxArch, err := c.PTXArch(arch)
	if err != nil {
		return nil, fmt.Errorf("kernels: load %s on device %d: %w; no PTX fallback: %v", name, dev.Info().Ordinal, cubinErr, err)
	}
	ptx, err := c.BuildKind(src, name, PTX, ptxArch, opts...)
	if err != nil {
		return nil, fmt.Errorf("kernels: load %s on device %d: %w; PTX fallback: %v", name, dev.Info().Ordinal, cubinErr, err)
	}
	mod, err = dev.LoadModule(ptx.Data)
	if err != nil {
		return nil, fmt.Errorf("kernels: load %s on device %d: CUBIN: %v; PTX %s: %w%s", name, dev.Info().Ordinal, cubinErr, ptxArch, err, hint)
	}
	return &Module{dev: dev, mod: mod, img: ptx}, nil
}

// Image is what was loaded.
func (m *Module) Image() Image { return m.img }

// Function looks up a kernel by its extern "C" name.
func (m *Module) Function(name string) (cuda.Function, error) { return m.dev.Function(m.mod, name) }

// Unload unloads the module; its functions become invalid.
func (m *Module) Unload() error { return m.dev.UnloadModule(m.mod) }
