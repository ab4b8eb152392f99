/*
 * mock_gemm.h: the matrix product both CPU mocks (libcublas and
 * libcublasLt) compute, written from the BLAS definition, column-major:
 *
 *   C(i,j) = alpha * sum_p op(A)(i,p) * op(B)(p,j) + beta * C(i,j)
 *   X(r,c) is X[r + c*ldx]; op(X) = X, or X^T (element (r,c) is X(c,r)).
 *
 * Device pointers are host pointers (the mock libcuda allocates with
 * malloc). Products accumulate in fp32, as CUBLAS_COMPUTE_32F does, and a
 * bf16 output is rounded to nearest-even once, on store. beta == 0 means C
 * is not read, so whatever it held (NaN included) does not leak in.
 *
 * -DMOCK_GEMM_ERROR=e builds a faulty library whose every product is off
 * by a relative e (alpha·(1+e)), for tests that a check on the GPU's
 * results notices a GEMM that is slightly wrong.
 */
#ifndef MOCK_GEMM_H
#define MOCK_GEMM_H

#include <stdint.h>
#include <string.h>

enum { MOCK_R_32F = 0, MOCK_R_16BF = 14 };

static inline float mock_bf16_load(uint16_t h) {
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline uint16_t mock_bf16_store(float f) {
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
		return (uint16_t)((u >> 16) | 0x0040u);
	}
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

static inline size_t mock_elem_size(int type) { return type == MOCK_R_16BF ? 2 : 4; }

static inline float mock_get(const void *p, int type, int64_t i) {
	if (type == MOCK_R_16BF) {
		return mock_bf16_load(((const uint16_t *)p)[i]);
	}
	return ((const float *)p)[i];
}

static inline void mock_put(void *p, int type, int64_t i, float v) {
	if (type == MOCK_R_16BF) {
		((uint16_t *)p)[i] = mock_bf16_store(v);
	} else {
		((float *)p)[i] = v;
	}
}

/* mock_gemm computes one product; trans is 0 for N, nonzero for T (for
 * real types CUBLAS_OP_C is T). bias, if not NULL, has m elements of
 * C's type and is added to every column after the scaling. C is read from
 * c and the result written to d (the same pointer for cuBLAS). */
static inline void mock_gemm(int transa, int transb, int64_t m, int64_t n, int64_t k, float alpha,
                      const void *a, int atype, int64_t lda, const void *b, int btype, int64_t ldb,
                      float beta, const void *c, void *d, int ctype, int64_t ldc, const void *bias) {
	for (int64_t j = 0; j < n; j++) {
		for (int64_t i = 0; i < m; i++) {
			float acc = 0;
			for (int64_t p = 0; p < k; p++) {
				float x = mock_get(a, atype, transa ? p + i * lda : i + p * lda);
				float y = mock_get(b, btype, transb ? j + p * ldb : p + j * ldb);
				acc += x * y;
			}
#ifdef MOCK_GEMM_ERROR
			float v = alpha * (1.0f + (float)(MOCK_GEMM_ERROR)) * acc;
#else
			float v = alpha * acc;
#endif
			if (beta != 0) {
				v += beta * mock_get(c, ctype, i + j * ldc);
			}
			if (bias != NULL) {
				v += mock_get(bias, ctype, i);
			}
			mock_put(d, ctype, i + j * ldc, v);
		}
	}
}

#endif /* MOCK_GEMM_H */
