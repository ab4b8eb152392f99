// Package cublas owns gotrain's use of cuBLAS and cuBLASLt, loaded at run
// time with dlopen (libcublas.so.13/.12/.11 and libcublasLt of the same
// major) so the binary builds and runs without them: the handle, its
// stream, workspace and math mode, and the GEMMs the CUDA backend needs,
// GemmEx and GemmStridedBatchedEx with fp32 or bf16 inputs and fp32
// compute, plus cuBLASLt matmuls with fused epilogues (bias, tanh GELU,
// the GELU's input kept for the backward pass), whose descriptors,
// layouts and heuristic results an LtHandle makes once per product shape
// and reuses.
//
// # Layout
//
// cuBLAS is column-major: element (i, j) of an r×c matrix with leading
// dimension ld is at i + j*ld. gotrain's tensors are row-major, and a
// row-major r×c matrix is, bit for bit, the column-major c×r matrix of its
// transpose. So the row-major product C = op(A)·op(B) is computed as the
// column-major C^T = op(B)^T·op(A)^T, that is GemmEx with A and B swapped
// and m and n swapped: GemmRowMajor does exactly that.
//
// # Threads
//
// Library and LtLibrary are immutable after loading and safe for
// concurrent use. A Handle or LtHandle is not: use each from one goroutine
// at a time. cuBLAS runs on the CUDA runtime, which uses the device's
// primary context, current per OS thread; so create handles and call them
// inside cuda.Device.Do, on the device's thread.
//
// # Memory
//
// Matrices are cuda.DevicePtr device addresses, never Go memory. alpha and
// beta are host floats (CUBLAS_POINTER_MODE_HOST), copied into the C
// trampoline's frame, so no Go pointer crosses. Calls are asynchronous on
// the handle's stream, as in cuBLAS: synchronise the stream before reading
// C back. Every call checks its arguments first and refuses, with an error
// naming the argument, what cuBLAS would reject.
//
// The package needs cgo.
package cublas
