/*
 * mock_cublas.c: a CPU stand-in for libcublas.so, built with gcc by
 * cudatest.BuildMockCUBLAS for tests and loaded through GOTRAIN_LIBCUBLAS.
 * It exports the cuBLAS symbols gotrain resolves, with the real C
 * signatures and enum values, and computes real results (mock_gemm.h), so
 * a wrong argument order, leading dimension, stride, type or enum value
 * gives a wrong answer or a status a test sees.
 *
 * Argument checks follow the cuBLAS documentation: negative sizes, short
 * leading dimensions or a negative batch count are
 * CUBLAS_STATUS_INVALID_VALUE; a type or compute-type combination outside
 * fp32 / bf16-in with fp32 compute is CUBLAS_STATUS_NOT_SUPPORTED; a
 * workspace not aligned to 256 bytes is CUBLAS_STATUS_INVALID_VALUE.
 *
 * A workspace set on the handle is used as the real library may use it:
 * every GEMM overwrites all of it (with 0xA5 bytes), so tests can see that
 * the pointer and size arrived, and that nothing beyond the size is
 * touched.
 *
 * Every accepted GEMM call is counted by input and compute type in the
 * structure counters (mock_counters.h), when GOTRAIN_MOCK_COUNTERS names
 * their file.
 *
 * Build options: -DMOCK_CUBLAS_MAJOR/MINOR/PATCH (default 12.3.4), the
 * version cublasGetProperty and cublasGetVersion_v2 report;
 * -DMOCK_NO_STATUS_STRING leaves out cublasGetStatusString and
 * cublasGetStatusName, as in cuBLAS before 11.4.2;
 * -DMOCK_CREATE_NOT_INITIALIZED makes cublasCreate_v2 fail with
 * CUBLAS_STATUS_NOT_INITIALIZED, as the real one does without a usable GPU
 * or with a driver older than its CUDA release.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mock_counters.h"
#include "mock_gemm.h"

#ifndef MOCK_CUBLAS_MAJOR
#define MOCK_CUBLAS_MAJOR 12
#endif
#ifndef MOCK_CUBLAS_MINOR
#define MOCK_CUBLAS_MINOR 3
#endif
#ifndef MOCK_CUBLAS_PATCH
#define MOCK_CUBLAS_PATCH 4
#endif

#define EXPORT __attribute__((visibility("default")))

typedef int cublasStatus_t;
enum {
	CUBLAS_STATUS_SUCCESS = 0,
	CUBLAS_STATUS_NOT_INITIALIZED = 1,
	CUBLAS_STATUS_ALLOC_FAILED = 3,
	CUBLAS_STATUS_INVALID_VALUE = 7,
	CUBLAS_STATUS_ARCH_MISMATCH = 8,
	CUBLAS_STATUS_MAPPING_ERROR = 11,
	CUBLAS_STATUS_EXECUTION_FAILED = 13,
	CUBLAS_STATUS_INTERNAL_ERROR = 14,
	CUBLAS_STATUS_NOT_SUPPORTED = 15,
	CUBLAS_STATUS_LICENSE_ERROR = 16
};

struct cublasContext {
	void *stream;
	int math;
	void *ws;
	size_t ws_bytes;
};
typedef struct cublasContext *cublasHandle_t;

EXPORT cublasStatus_t cublasCreate_v2(cublasHandle_t *h) {
	if (h == NULL) {
		return CUBLAS_STATUS_INVALID_VALUE;
	}
#ifdef MOCK_CREATE_NOT_INITIALIZED
	return CUBLAS_STATUS_NOT_INITIALIZED;
#endif
	*h = calloc(1, sizeof(**h));
	return *h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

EXPORT cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
	if (h == NULL) {
		return CUBLAS_STATUS_NOT_INITIALIZED;
	}
	free(h);
	return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasGetProperty(int type, int *value) {
	if (value == NULL) {
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	switch (type) {
	case 0:
		*value = MOCK_CUBLAS_MAJOR;
		return CUBLAS_STATUS_SUCCESS;
	case 1:
		*value = MOCK_CUBLAS_MINOR;
		return CUBLAS_STATUS_SUCCESS;
	case 2:
		*value = MOCK_CUBLAS_PATCH;
		return CUBLAS_STATUS_SUCCESS;
	}
	return CUBLAS_STATUS_INVALID_VALUE;
}

EXPORT cublasStatus_t cublasGetVersion_v2(cublasHandle_t h, int *version) {
	if (h == NULL) {
		return CUBLAS_STATUS_NOT_INITIALIZED;
	}
	if (version == NULL) {
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	*version = MOCK_CUBLAS_MAJOR * 10000 + MOCK_CUBLAS_MINOR * 100 + MOCK_CUBLAS_PATCH;
	return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasSetStream_v2(cublasHandle_t h, void *stream) {
	if (h == NULL) {
		return CUBLAS_STATUS_NOT_INITIALIZED;
	}
	h->stream = stream;
	return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasGetStream_v2(cublasHandle_t h, void **stream) {
	if (h == NULL) {
		return CUBLAS_STATUS_NOT_INITIALIZED;
	}
	if (stream == NULL) {
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	*stream = h->stream;
	return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasSetMathMode(cublasHandle_t h, int mode) {
	if (h == NULL) {
		return CUBLAS_STATUS_NOT_INITIALIZED;
	}
	int base = mode & ~16; /* CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION is a flag */
	if (base < 0 || base > 3) {
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	h->math = mode;
	return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasGetMathMode(cublasHandle_t h, int *mode) {
	if (h == NULL) {
		return CUBLAS_STATUS_NOT_INITIALIZED;
	}
	if (mode == NULL) {
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	*mode = h->math;
	return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *ws, size_t bytes) {
	if (h == NULL) {
		return CUBLAS_STATUS_NOT_INITIALIZED;
	}
	if (((uintptr_t)ws % 256) != 0 || (ws == NULL && bytes != 0)) {
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	h->ws = ws;
	h->ws_bytes = bytes;
	return CUBLAS_STATUS_SUCCESS;
}

#ifndef MOCK_NO_STATUS_STRING
EXPORT const char *cublasGetStatusString(cublasStatus_t s) {
	switch (s) {
	case CUBLAS_STATUS_SUCCESS:
		return "mock: success";
	case CUBLAS_STATUS_NOT_INITIALIZED:
		return "mock: the handle was not created";
	case CUBLAS_STATUS_ALLOC_FAILED:
		return "mock: allocation failed";
	case CUBLAS_STATUS_INVALID_VALUE:
		return "mock: an argument is out of range";
	case CUBLAS_STATUS_ARCH_MISMATCH:
		return "mock: the device lacks a required feature";
	case CUBLAS_STATUS_EXECUTION_FAILED:
		return "mock: the kernel failed to run";
	case CUBLAS_STATUS_INTERNAL_ERROR:
		return "mock: internal error";
	case CUBLAS_STATUS_NOT_SUPPORTED:
		return "mock: this combination of types is not supported";
	}
	return "mock: unknown status";
}

EXPORT const char *cublasGetStatusName(cublasStatus_t s) {
	switch (s) {
	case CUBLAS_STATUS_SUCCESS:
		return "CUBLAS_STATUS_SUCCESS";
	case CUBLAS_STATUS_NOT_INITIALIZED:
		return "CUBLAS_STATUS_NOT_INITIALIZED";
	case CUBLAS_STATUS_INVALID_VALUE:
		return "CUBLAS_STATUS_INVALID_VALUE";
	case CUBLAS_STATUS_NOT_SUPPORTED:
		return "CUBLAS_STATUS_NOT_SUPPORTED";
	}
	return "CUBLAS_STATUS_UNKNOWN";
}
#endif

/* check validates a GEMM's arguments the way cuBLAS documents them. */
static cublasStatus_t check(cublasHandle_t h, int ta, int tb, int m, int n, int k, const void *alpha,
                            int at, int lda, int bt, int ldb, const void *beta, int ct, int ldc,
                            int compute, int algo) {
	if (h == NULL) {
		return CUBLAS_STATUS_NOT_INITIALIZED;
	}
	if (ta < 0 || ta > 2 || tb < 0 || tb > 2 || m < 0 || n < 0 || k < 0 || alpha == NULL || beta == NULL) {
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	int arows = ta == 0 ? m : k, brows = tb == 0 ? k : n;
	if (lda < (arows > 1 ? arows : 1) || ldb < (brows > 1 ? brows : 1) || ldc < (m > 1 ? m : 1)) {
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	if (!(algo == -1 || (algo >= 0 && algo <= 23) || (algo >= 99 && algo <= 115))) {
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	int f32 = at == MOCK_R_32F && bt == MOCK_R_32F && ct == MOCK_R_32F;
	int bf16 = at == MOCK_R_16BF && bt == MOCK_R_16BF && (ct == MOCK_R_16BF || ct == MOCK_R_32F);
	/* COMPUTE_32F (68), _PEDANTIC (69), _FAST_16F (74), _FAST_16BF (75), _FAST_TF32 (77): all scale in fp32 */
	int c32 = compute == 68 || compute == 69 || compute == 74 || compute == 75 || compute == 77;
	if (!(f32 || bf16) || !c32) {
		return CUBLAS_STATUS_NOT_SUPPORTED;
	}
	return CUBLAS_STATUS_SUCCESS;
}

static void scribble(cublasHandle_t h) {
	if (h->ws != NULL) {
		memset(h->ws, 0xA5, h->ws_bytes);
	}
}

EXPORT cublasStatus_t cublasGemmEx(cublasHandle_t h, int ta, int tb, int m, int n, int k, const void *alpha,
                                   const void *A, int at, int lda, const void *B, int bt, int ldb,
                                   const void *beta, void *C, int ct, int ldc, int compute, int algo) {
	cublasStatus_t rc = check(h, ta, tb, m, n, k, alpha, at, lda, bt, ldb, beta, ct, ldc, compute, algo);
	if (rc != CUBLAS_STATUS_SUCCESS) {
		return rc;
	}
	mock_count_gemm(at, compute, 1);
	if (m == 0 || n == 0) {
		return CUBLAS_STATUS_SUCCESS;
	}
	scribble(h);
	mock_gemm(ta != 0, tb != 0, m, n, k, *(const float *)alpha, A, at, lda, B, bt, ldb,
	          *(const float *)beta, C, C, ct, ldc, NULL);
	return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, int ta, int tb, int m, int n, int k,
                                                 const void *alpha, const void *A, int at, int lda, long long sa,
                                                 const void *B, int bt, int ldb, long long sb, const void *beta,
                                                 void *C, int ct, int ldc, long long sc, int batch, int compute,
                                                 int algo) {
	cublasStatus_t rc = check(h, ta, tb, m, n, k, alpha, at, lda, bt, ldb, beta, ct, ldc, compute, algo);
	if (rc != CUBLAS_STATUS_SUCCESS) {
		return rc;
	}
	if (batch < 0) {
		return CUBLAS_STATUS_INVALID_VALUE;
	}
	mock_count_gemm(at, compute, batch);
	if (m == 0 || n == 0 || batch == 0) {
		return CUBLAS_STATUS_SUCCESS;
	}
	scribble(h);
	for (int i = 0; i < batch; i++) {
		const char *a = (const char *)A + (size_t)(sa * i) * mock_elem_size(at);
		const char *b = (const char *)B + (size_t)(sb * i) * mock_elem_size(bt);
		char *c = (char *)C + (size_t)(sc * i) * mock_elem_size(ct);
		mock_gemm(ta != 0, tb != 0, m, n, k, *(const float *)alpha, a, at, lda, b, bt, ldb,
		          *(const float *)beta, c, c, ct, ldc, NULL);
	}
	return CUBLAS_STATUS_SUCCESS;
}
