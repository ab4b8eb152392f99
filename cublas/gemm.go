package cublas

/*
#cgo CFLAGS: -I${SRCDIR}/../csrc -D_GNU_SOURCE
#include "gt_dl.h"
#include "gt_cublas.h"
*/
import "C"

// GemmEx computes, column-major, on the handle's stream (cublasGemmEx):
//
//	C = alpha·op(A)·op(B) + beta·C,  op(A) m×k, op(B) k×n, C m×n
//
// A, B and C are fp32, or A and B bf16 with a bf16 or fp32 C; compute is
// one of the fp32 compute types. With beta == 0, C is not read. Arguments
// cuBLAS would reject are refused first with an error wrapping
// ErrInvalidArgument.
func (h *Handle) GemmEx(transA, transB Op, m, n, k int, alpha float32, a, b Matrix, beta float32, c Matrix, compute ComputeType) error {
	if h.h == nil {
		return ErrClosed
	}
	if err := checkGemm("cublasGemmEx", transA, transB, m, n, k, a, b, c, compute); err != nil {
		return err
	}
	st := C.gt_cublas_gemm_ex(&h.lib.fns, h.h, C.gt_cublasOperation_t(transA), C.gt_cublasOperation_t(transB),
		C.int(m), C.int(n), C.int(k), C.float(alpha),
		C.uint64_t(a.Ptr), C.gt_cudaDataType_t(a.Type), C.int(a.LD),
		C.uint64_t(b.Ptr), C.gt_cudaDataType_t(b.Type), C.int(b.LD),
		C.float(beta), C.uint64_t(c.Ptr), C.gt_cudaDataType_t(c.Type), C.int(c.LD),
		C.gt_cublasComputeType_t(compute), gemmAlgoDefault)
	return h.lib.err(st, "cublasGemmEx (%v%v m=%d n=%d k=%d, %v·%v→%v, %v)", transA, transB, m, n, k, a.Type, b.Type, c.Type, compute)
}

// GemmStridedBatchedEx is batch independent GemmEx products
// (cublasGemmStridedBatchedEx): product i uses A at a.Ptr + i·strideA
// elements, B at b.Ptr + i·strideB and C at c.Ptr + i·strideC. A stride of
// 0 reuses one matrix for every product; C's stride must keep the outputs
// apart: stacked (at least ldc·n), or side by side within C's columns (at
// least m, the last output ending by ldc).
func (h *Handle) GemmStridedBatchedEx(transA, transB Op, m, n, k int, alpha float32, a Matrix, strideA int64,
	b Matrix, strideB int64, beta float32, c Matrix, strideC int64, batch int, compute ComputeType) error {
	if h.h == nil {
		return ErrClosed
	}
	const op = "cublasGemmStridedBatchedEx"
	if err := checkGemm(op, transA, transB, m, n, k, a, b, c, compute); err != nil {
		return err
	}
	if err := checkStrides(op, m, n, c, strideA, strideB, strideC, batch); err != nil {
		return err
	}
	st := C.gt_cublas_gemm_strided_batched_ex(&h.lib.fns, h.h, C.gt_cublasOperation_t(transA), C.gt_cublasOperation_t(transB),
		C.int(m), C.int(n), C.int(k), C.float(alpha),
		C.uint64_t(a.Ptr), C.gt_cudaDataType_t(a.Type), C.int(a.LD), C.longlong(strideA),
		C.uint64_t(b.Ptr), C.gt_cudaDataType_t(b.Type), C.int(b.LD), C.longlong(strideB),
		C.float(beta), C.uint64_t(c.Ptr), C.gt_cudaDataType_t(c.Type), C.int(c.LD), C.longlong(strideC),
		C.int(batch), C.gt_cublasComputeType_t(compute), gemmAlgoDefault)
	return h.lib.err(st, "%s (%v%v m=%d n=%d k=%d batch=%d, %v·%v→%v, %v)", op, transA, transB, m, n, k, batch,
		a.Type, b.Type, c.Type, compute)
}

// GemmRowMajor computes the same product for row-major matrices: element
// (i, j) of each Matrix is at i·LD + j, so LD is the row stride (at least
// the columns of the matrix as stored), and
//
//	C = alpha·op(A)·op(B) + beta·C,  op(A) m×k, op(B) k×n, C m×n, row-major.
//
// A row-major matrix is the column-major matrix of its transpose, so this
// is the column-major C^T = op(B)^T·op(A)^T: GemmEx with A and B, and m
// and n, swapped, and the same transpose flags.
func (h *Handle) GemmRowMajor(transA, transB Op, m, n, k int, alpha float32, a, b Matrix, beta float32, c Matrix, compute ComputeType) error {
	return h.GemmEx(transB, transA, n, m, k, alpha, b, a, beta, c, compute)
}

// GemmStridedBatchedRowMajor is GemmStridedBatchedEx for row-major
// matrices, as GemmRowMajor is GemmEx (e.g. attention's per-head
// Q·K^T with one batch entry per (batch, head)).
func (h *Handle) GemmStridedBatchedRowMajor(transA, transB Op, m, n, k int, alpha float32, a Matrix, strideA int64,
	b Matrix, strideB int64, beta float32, c Matrix, strideC int64, batch int, compute ComputeType) error {
	return h.GemmStridedBatchedEx(transB, transA, n, m, k, alpha, b, strideB, a, strideA, beta, c, strideC, batch, compute)
}
