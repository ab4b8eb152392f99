// Package emu runs gotrain's CUDA kernel sources on the CPU, for tests: it
// compiles them with g++ after csrc/gt_emu.h, the emulation of the CUDA
// execution model (blocks, threads as fibers, __syncthreads, __shared__,
// warp shuffles and votes, atomics), into a shared library, and opens such
// a library to launch kernels directly or to read how often each kernel
// ran.
//
// The mock CUDA driver (cuda/cudatest) launches kernels in the library
// named by $GOTRAIN_MOCK_CUDA_EMU, so code written against the cuda
// package (the CUDA backend, the typed launchers of package kernels) runs
// these same kernels end to end without a GPU.
//
// Building needs the source tree (csrc/ is found next to this package's
// source file) and g++; it is meant for tests and is never used by the
// gotrain binary. A Library is safe for concurrent use from different OS
// threads; launches on one OS thread run one at a time.
package emu
