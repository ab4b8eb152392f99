package kernels

import (
	"errors"
	"fmt"
)

// nvrtcErrorInvalidOption is NVRTC_ERROR_INVALID_OPTION, what NVRTC answers
// for an architecture it does not know.
const nvrtcErrorInvalidOption = 5

// Compiler compiles kernel sources with NVRTC through an on-disk cache. It
// is safe for concurrent use.
type Compiler struct {
	nvrtc *NVRTC
	cache *Cache // nil: no caching
}

// NewCompiler uses n, and cache unless it is nil.
func NewCompiler(n *NVRTC, cache *Cache) *Compiler { return &Compiler{nvrtc: n, cache: cache} }

// NVRTC is the compiler's NVRTC.
func (c *Compiler) NVRTC() *NVRTC { return c.nvrtc }

// Build compiles src for a device of compute capability arch: a CUBIN for
// sm_arch when NVRTC can target it, else PTX for the newest compute_XY
// NVRTC knows that is not newer than arch (the driver JIT-compiles it for
// the device). A syntax or type error in src is not retried.
func (c *Compiler) Build(src, name string, arch SM, opts ...string) (Image, error) {
	if c.nvrtc.CanCUBIN() && c.nvrtc.Supports(arch) {
		img, err := c.BuildKind(src, name, CUBIN, arch, opts...)
		var ce *CompileError
		if err == nil || !errors.As(err, &ce) || ce.Code != nvrtcErrorInvalidOption {
			return img, err
		}
	}
	ptxArch, err := c.PTXArch(arch)
	if err != nil {
		return Image{}, fmt.Errorf("kernels: compile %s: %w", name, err)
	}
	return c.BuildKind(src, name, PTX, ptxArch, opts...)
}

// PTXArch is the newest architecture NVRTC supports that is not newer
// than arch: PTX for it runs on arch.
func (c *Compiler) PTXArch(arch SM) (SM, error) {
	best := SM(0)
	for _, a := range c.nvrtc.archs {
		if a <= arch && a > best {
			best = a
		}
	}
	if best == 0 {
		return 0, fmt.Errorf("NVRTC %s supports %v, nothing for %s or older%s", c.nvrtc.VersionString(), c.nvrtc.archs, arch,
			tooOldHint(c.nvrtc.major, arch))
	}
	return best, nil
}

// BuildKind compiles src to exactly kind for arch, through the cache.
func (c *Compiler) BuildKind(src, name string, kind Kind, arch SM, opts ...string) (Image, error) {
	key := ""
	if c.cache != nil {
		key = CacheKey(c.nvrtc.VersionString(), name, kind, arch, opts, src)
		data, ok, err := c.cache.Get(key, kind)
		if err != nil {
			return Image{}, err
		}
		if ok {
			return Image{Kind: kind, Arch: arch, Data: data, Cached: true}, nil
		}
	}
	img, err := c.nvrtc.Compile(src, name, arch, kind, opts...)
	if err != nil {
		return Image{}, err
	}
	if c.cache != nil {
		// A cache that cannot be written costs a recompilation next time,
		// never this build.
		img.CacheErr = c.cache.Put(key, kind, img.Data)
	}
	return img, nil
}
