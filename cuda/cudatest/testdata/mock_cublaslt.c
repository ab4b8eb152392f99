/*
 * mock_cublaslt.c: a CPU stand-in for libcublasLt.so, built with gcc by
 * cudatest.BuildMockCUBLASLt for tests and loaded through
 * GOTRAIN_LIBCUBLASLT. It implements the descriptor calls (checking each
 * attribute's id and value size as cublasLt.h defines them), a heuristic
 * that offers one algorithm when the layouts describe a consistent
 * product, and cublasLtMatmul computing
 *
 *   D = alpha * op(A) * op(B) + beta * C  [+ bias broadcast along columns]
 *
 * with the DEFAULT and BIAS epilogues (bias: one element of D's type per
 * row of D), column-major (CUBLASLT_ORDER_COL, the default order), one
 * matrix per layout (batch count 1).
 *
 * -DMOCK_LT_NO_ALGO makes the heuristic find no algorithm, as the real one
 * does for a product it has no kernel for.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mock_counters.h"
#include "mock_gemm.h"

#define EXPORT __attribute__((visibility("default")))

#ifndef MOCK_CUBLASLT_VERSION
#define MOCK_CUBLASLT_VERSION 120304
#endif

enum { ST_OK = 0, ST_NOT_INITIALIZED = 1, ST_INVALID_VALUE = 7, ST_NOT_SUPPORTED = 15 };
enum { EPI_DEFAULT = 1, EPI_BIAS = 4 };
#define ALGO_MAGIC 0x6d6f636b6c74ull /* "mocklt" */

struct lt_handle {
	int magic;
};
struct lt_desc {
	int compute, scale;
	int32_t transa, transb;
	uint32_t epilogue;
	const void *bias;
};
struct lt_layout {
	int type;
	uint64_t rows, cols;
	int64_t ld;
	int32_t batch;
	int64_t stride;
};
struct lt_pref {
	uint64_t max_ws;
};
typedef struct {
	uint64_t data[8];
} lt_algo;
typedef struct {
	lt_algo algo;
	size_t workspaceSize;
	int state;
	float wavesCount;
	int reserved[4];
} lt_heur;

EXPORT int cublasLtCreate(struct lt_handle **h) {
	if (h == NULL) {
		return ST_INVALID_VALUE;
	}
	*h = calloc(1, sizeof(**h));
	(*h)->magic = 1;
	return ST_OK;
}

EXPORT int cublasLtDestroy(struct lt_handle *h) {
	if (h == NULL) {
		return ST_NOT_INITIALIZED;
	}
	free(h);
	return ST_OK;
}

EXPORT size_t cublasLtGetVersion(void) { return MOCK_CUBLASLT_VERSION; }

EXPORT int cublasLtMatmulDescCreate(struct lt_desc **d, int compute, int scale) {
	if (d == NULL) {
		return ST_INVALID_VALUE;
	}
	*d = calloc(1, sizeof(**d));
	(*d)->compute = compute;
	(*d)->scale = scale;
	(*d)->epilogue = EPI_DEFAULT;
	return ST_OK;
}

EXPORT int cublasLtMatmulDescDestroy(struct lt_desc *d) {
	free(d);
	return ST_OK;
}

/* set copies an attribute whose value must be exactly want bytes. */
static int set(void *dst, size_t want, const void *buf, size_t size) {
	if (buf == NULL || size != want) {
		return ST_INVALID_VALUE;
	}
	memcpy(dst, buf, want);
	return ST_OK;
}

EXPORT int cublasLtMatmulDescSetAttribute(struct lt_desc *d, int attr, const void *buf, size_t size) {
	if (d == NULL) {
		return ST_INVALID_VALUE;
	}
	switch (attr) {
	case 3:
		return set(&d->transa, sizeof(int32_t), buf, size);
	case 4:
		return set(&d->transb, sizeof(int32_t), buf, size);
	case 7:
		return set(&d->epilogue, sizeof(uint32_t), buf, size);
	case 8:
		return set(&d->bias, sizeof(void *), buf, size);
	}
	return ST_INVALID_VALUE;
}

EXPORT int cublasLtMatrixLayoutCreate(struct lt_layout **l, int type, uint64_t rows, uint64_t cols, int64_t ld) {
	if (l == NULL) {
		return ST_INVALID_VALUE;
	}
	if (ld < (int64_t)(rows > 1 ? rows : 1)) {
		return ST_INVALID_VALUE;
	}
	*l = calloc(1, sizeof(**l));
	(*l)->type = type;
	(*l)->rows = rows;
	(*l)->cols = cols;
	(*l)->ld = ld;
	(*l)->batch = 1;
	return ST_OK;
}

EXPORT int cublasLtMatrixLayoutDestroy(struct lt_layout *l) {
	free(l);
	return ST_OK;
}

EXPORT int cublasLtMatrixLayoutSetAttribute(struct lt_layout *l, int attr, const void *buf, size_t size) {
	if (l == NULL) {
		return ST_INVALID_VALUE;
	}
	switch (attr) {
	case 5:
		return set(&l->batch, sizeof(int32_t), buf, size);
	case 6:
		return set(&l->stride, sizeof(int64_t), buf, size);
	}
	return ST_INVALID_VALUE;
}

EXPORT int cublasLtMatmulPreferenceCreate(struct lt_pref **p) {
	if (p == NULL) {
		return ST_INVALID_VALUE;
	}
	*p = calloc(1, sizeof(**p));
	return ST_OK;
}

EXPORT int cublasLtMatmulPreferenceDestroy(struct lt_pref *p) {
	free(p);
	return ST_OK;
}

EXPORT int cublasLtMatmulPreferenceSetAttribute(struct lt_pref *p, int attr, const void *buf, size_t size) {
	if (p == NULL || attr != 1) {
		return ST_INVALID_VALUE;
	}
	return set(&p->max_ws, sizeof(uint64_t), buf, size);
}

/* consistent checks that the layouts describe D(m×n) = op(A)(m×k)·op(B)(k×n)
 * in a supported combination of types and epilogue. */
static int consistent(const struct lt_desc *d, const struct lt_layout *a, const struct lt_layout *b,
                      const struct lt_layout *c, const struct lt_layout *dl) {
	uint64_t am = d->transa ? a->cols : a->rows, ak = d->transa ? a->rows : a->cols;
	uint64_t bk = d->transb ? b->cols : b->rows, bn = d->transb ? b->rows : b->cols;
	if (d->transa < 0 || d->transa > 2 || d->transb < 0 || d->transb > 2) {
		return ST_INVALID_VALUE;
	}
	if (am != dl->rows || bn != dl->cols || ak != bk || c->rows != dl->rows || c->cols != dl->cols) {
		return ST_INVALID_VALUE;
	}
	if (a->batch != 1 || b->batch != 1 || c->batch != 1 || dl->batch != 1 || c->type != dl->type) {
		return ST_NOT_SUPPORTED;
	}
	int f32 = a->type == MOCK_R_32F && b->type == MOCK_R_32F && c->type == MOCK_R_32F;
	int bf16 = a->type == MOCK_R_16BF && b->type == MOCK_R_16BF && (c->type == MOCK_R_16BF || c->type == MOCK_R_32F);
	int c32 = d->compute == 68 || d->compute == 69 || d->compute == 74 || d->compute == 75 || d->compute == 77;
	if (!(f32 || bf16) || !c32 || d->scale != MOCK_R_32F) {
		return ST_NOT_SUPPORTED;
	}
	if (d->epilogue != EPI_DEFAULT && d->epilogue != EPI_BIAS) {
		return ST_NOT_SUPPORTED;
	}
	if (d->epilogue == EPI_BIAS && d->bias == NULL) {
		return ST_INVALID_VALUE;
	}
	return ST_OK;
}

EXPORT int cublasLtMatmulAlgoGetHeuristic(struct lt_handle *h, struct lt_desc *d, struct lt_layout *a,
                                          struct lt_layout *b, struct lt_layout *c, struct lt_layout *dl,
                                          struct lt_pref *p, int requested, lt_heur *results, int *returned) {
	if (h == NULL) {
		return ST_NOT_INITIALIZED;
	}
	if (d == NULL || a == NULL || b == NULL || c == NULL || dl == NULL || p == NULL || results == NULL ||
	    returned == NULL || requested < 1) {
		return ST_INVALID_VALUE;
	}
	*returned = 0;
	int rc = consistent(d, a, b, c, dl);
	if (rc != ST_OK) {
		return rc;
	}
#ifdef MOCK_LT_NO_ALGO
	return ST_OK;
#endif
	memset(&results[0], 0, sizeof(results[0]));
	results[0].algo.data[0] = ALGO_MAGIC;
	results[0].workspaceSize = 0;
	results[0].state = ST_OK;
	results[0].wavesCount = 1;
	*returned = 1;
	return ST_OK;
}

EXPORT int cublasLtMatmul(struct lt_handle *h, struct lt_desc *d, const void *alpha, const void *A,
                          struct lt_layout *a, const void *B, struct lt_layout *b, const void *beta, const void *C,
                          struct lt_layout *c, void *D, struct lt_layout *dl, const lt_algo *algo, void *ws,
                          size_t ws_bytes, void *stream) {
	(void)ws;
	(void)ws_bytes;
	(void)stream;
	if (h == NULL) {
		return ST_NOT_INITIALIZED;
	}
	if (d == NULL || alpha == NULL || beta == NULL || a == NULL || b == NULL || c == NULL || dl == NULL ||
	    algo == NULL || algo->data[0] != ALGO_MAGIC) {
		return ST_INVALID_VALUE;
	}
	int rc = consistent(d, a, b, c, dl);
	if (rc != ST_OK) {
		return rc;
	}
	/* mock_gemm reads C and writes D with one leading dimension */
	if (c->ld != dl->ld) {
		return ST_NOT_SUPPORTED;
	}
	mock_count_gemm(a->type, d->compute, 1);
	uint64_t k = d->transa ? a->rows : a->cols;
	mock_gemm(d->transa != 0, d->transb != 0, (int64_t)dl->rows, (int64_t)dl->cols, (int64_t)k,
	          *(const float *)alpha, A, a->type, a->ld, B, b->type, b->ld, *(const float *)beta, C, D, dl->type, dl->ld,
	          d->epilogue == EPI_BIAS ? d->bias : NULL);
	return ST_OK;
}
