// Package kernels owns gotrain's CUDA kernels: their CUDA C sources
// (embedded, no NVIDIA headers), compiling them at run time with NVRTC
// (libnvrtc, loaded with dlopen) to a CUBIN for the device's sm_XY, or to
// PTX that the driver compiles when NVRTC cannot target the device, an
// on-disk cache of compiled images keyed by source, options, target and
// NVRTC version, and loading them onto a cuda.Device.
//
// The memory-bound kernels (element-wise ops, norms, SwiGLU, AdamW, the
// reductions) move 16-byte packs of 8 elements through packed.cuh, which
// falls back to element access for a partial or misaligned pack, so any
// Buffer view works and the results do not depend on the path.
//
// NVRTC needs no GPU, so every kernel is compiled in CI. NVRTC, Cache and
// Compiler are safe for concurrent use. The package needs cgo.
package kernels
