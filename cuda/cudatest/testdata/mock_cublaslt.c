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
 * with the DEFAULT, BIAS, GELU, GELU_BIAS, GELU_AUX and GELU_AUX_BIAS
 * epilogues (bias: one element per row of D; GELU: the tanh form,
 * 0.5·x·(1+tanh(√(2/π)(x+0.044715x³))), of the fp32 result; aux: the GELU's
 * input, stored in D's type), column-major (CUBLASLT_ORDER_COL, the default
 * order), one matrix per layout (batch count 1).
 *
 * The epilogue arguments are checked as cublasLt.h documents them, and a
 * little more strictly where gotrain's wrapper promises more: a bias
 * epilogue needs CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE set explicitly, to
 * D's type (its default, "D's type", differs for fp8 products); an aux
 * epilogue needs EPILOGUE_AUX_LD at least D's rows and a multiple of 8; the
 * bias and aux pointers must be set (non-null) by the time of the matmul.
 * The algorithm the heuristic offers works only with buffers aligned as
 * the preference's MIN_ALIGNMENT_{A,B,C,D}_BYTES say (default 256, as in
 * cuBLASLt): cublasLtMatmul with a less aligned pointer fails with
 * CUBLAS_STATUS_INVALID_VALUE.
 *
 * With $GOTRAIN_MOCK_CUBLASLT_TRACE naming a file, every descriptor
 * creation, heuristic query and matmul appends a line ("desc_create",
 * "heuristic", "matmul EPILOGUE") to it, so tests can count them.
 *
 * -DMOCK_LT_NO_ALGO makes the heuristic find no algorithm, as the real one
 * does for a product it has no kernel for. -DMOCK_CREATE_NOT_INITIALIZED
 * makes cublasLtCreate fail with CUBLAS_STATUS_NOT_INITIALIZED, as the
 * real one does without a usable GPU or with a driver older than its
 * CUDA release.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mock_counters.h"
#include "mock_gemm.h"

#define EXPORT __attribute__((visibility("default")))

#ifndef MOCK_CUBLASLT_VERSION
#define MOCK_CUBLASLT_VERSION 120304
#endif

enum { ST_OK = 0, ST_NOT_INITIALIZED = 1, ST_INVALID_VALUE = 7, ST_NOT_SUPPORTED = 15 };
enum {
	EPI_DEFAULT = 1,
	EPI_BIAS = 4,
	EPI_GELU = 32,
	EPI_GELU_BIAS = 36,
	EPI_GELU_AUX = 160,
	EPI_GELU_AUX_BIAS = 164
};
/* cublasLtMatmulDescAttributes_t and cublasLtMatmulPreferenceAttributes_t
 * values this mock accepts. */
enum {
	DESC_TRANSA = 3,
	DESC_TRANSB = 4,
	DESC_EPILOGUE = 7,
	DESC_BIAS_POINTER = 8,
	DESC_AUX_POINTER = 11,
	DESC_AUX_LD = 12,
	DESC_BIAS_DATA_TYPE = 26
};
enum { PREF_MAX_WORKSPACE = 1, PREF_MIN_ALIGN_A = 5, PREF_MIN_ALIGN_D = 8 };
#define ALGO_MAGIC 0x6d6f636b6c74ull /* "mocklt" */

struct lt_handle {
	int magic;
};
struct lt_desc {
	int compute, scale;
	int32_t transa, transb;
	uint32_t epilogue;
	const void *bias;
	int32_t bias_type;
	int bias_type_set;
	void *aux;
	int64_t aux_ld;
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
	uint32_t min_align[4]; /* A, B, C, D */
};

/* trace appends one line to $GOTRAIN_MOCK_CUBLASLT_TRACE, if set. */
static void trace(const char *what, uint32_t epilogue) {
	const char *path = getenv("GOTRAIN_MOCK_CUBLASLT_TRACE");
	if (path == NULL || *path == 0) {
		return;
	}
	FILE *f = fopen(path, "a");
	if (f == NULL) {
		return;
	}
	if (epilogue) {
		fprintf(f, "%s %u\n", what, epilogue);
	} else {
		fprintf(f, "%s\n", what);
	}
	fclose(f);
}

static int has_bias(uint32_t e) { return e == EPI_BIAS || e == EPI_GELU_BIAS || e == EPI_GELU_AUX_BIAS; }
static int has_gelu(uint32_t e) { return e == EPI_GELU || e == EPI_GELU_BIAS || e == EPI_GELU_AUX || e == EPI_GELU_AUX_BIAS; }
static int has_aux(uint32_t e) { return e == EPI_GELU_AUX || e == EPI_GELU_AUX_BIAS; }
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
#ifdef MOCK_CREATE_NOT_INITIALIZED
	return ST_NOT_INITIALIZED;
#endif
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
	(*d)->bias_type = -1;
	trace("desc_create", 0);
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
	case DESC_TRANSA:
		return set(&d->transa, sizeof(int32_t), buf, size);
	case DESC_TRANSB:
		return set(&d->transb, sizeof(int32_t), buf, size);
	case DESC_EPILOGUE:
		return set(&d->epilogue, sizeof(uint32_t), buf, size);
	case DESC_BIAS_POINTER:
		return set(&d->bias, sizeof(void *), buf, size);
	case DESC_AUX_POINTER:
		return set(&d->aux, sizeof(void *), buf, size);
	case DESC_AUX_LD:
		return set(&d->aux_ld, sizeof(int64_t), buf, size);
	case DESC_BIAS_DATA_TYPE: {
		int rc = set(&d->bias_type, sizeof(int32_t), buf, size);
		d->bias_type_set = rc == ST_OK;
		return rc;
	}
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
	for (int i = 0; i < 4; i++) {
		(*p)->min_align[i] = 256;
	}
	return ST_OK;
}

EXPORT int cublasLtMatmulPreferenceDestroy(struct lt_pref *p) {
	free(p);
	return ST_OK;
}

EXPORT int cublasLtMatmulPreferenceSetAttribute(struct lt_pref *p, int attr, const void *buf, size_t size) {
	if (p == NULL) {
		return ST_INVALID_VALUE;
	}
	if (attr == PREF_MAX_WORKSPACE) {
		return set(&p->max_ws, sizeof(uint64_t), buf, size);
	}
	if (attr >= PREF_MIN_ALIGN_A && attr <= PREF_MIN_ALIGN_D) {
		uint32_t a;
		int rc = set(&a, sizeof(uint32_t), buf, size);
		if (rc != ST_OK || a == 0 || (a & (a - 1)) != 0) {
			return ST_INVALID_VALUE;
		}
		p->min_align[attr - PREF_MIN_ALIGN_A] = a;
		return ST_OK;
	}
	return ST_INVALID_VALUE;
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
	if (d->epilogue != EPI_DEFAULT && !has_bias(d->epilogue) && !has_gelu(d->epilogue)) {
		return ST_NOT_SUPPORTED;
	}
	if (has_bias(d->epilogue) && (!d->bias_type_set || d->bias_type != dl->type)) {
		return ST_INVALID_VALUE;
	}
	if (has_aux(d->epilogue) && (d->aux_ld < (int64_t)dl->rows || d->aux_ld % 8 != 0)) {
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
	trace("heuristic", 0);
	memset(&results[0], 0, sizeof(results[0]));
	results[0].algo.data[0] = ALGO_MAGIC;
	/* The algorithm needs buffers aligned as the preference allows. */
	for (int i = 0; i < 4; i++) {
		results[0].algo.data[1 + i] = p->min_align[i];
	}
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
	const void *ptrs[4] = {A, B, C, D};
	for (int i = 0; i < 4; i++) {
		if ((uintptr_t)ptrs[i] % algo->data[1 + i] != 0) {
			return ST_INVALID_VALUE;
		}
	}
	if ((has_bias(d->epilogue) && d->bias == NULL) || (has_aux(d->epilogue) && d->aux == NULL)) {
		return ST_INVALID_VALUE;
	}
	trace("matmul", d->epilogue);
	mock_count_gemm(a->type, d->compute, 1);
	uint64_t k = d->transa ? a->rows : a->cols;
	const void *bias = has_bias(d->epilogue) ? d->bias : NULL;
	if (!has_gelu(d->epilogue)) {
		mock_gemm(d->transa != 0, d->transb != 0, (int64_t)dl->rows, (int64_t)dl->cols, (int64_t)k,
		          *(const float *)alpha, A, a->type, a->ld, B, b->type, b->ld, *(const float *)beta, C, D, dl->type,
		          dl->ld, bias);
		return ST_OK;
	}
	/* GELU epilogues: the product in fp32 (as mock_gemm forms it: alpha·acc,
	 * then beta·C, then the bias), the aux copy of it, then the GELU. */
	int64_t m = (int64_t)dl->rows, n = (int64_t)dl->cols;
	float *pre = malloc(sizeof(float) * (size_t)(m > 0 ? m : 1) * (size_t)(n > 0 ? n : 1));
	if (pre == NULL) {
		return 3; /* CUBLAS_STATUS_ALLOC_FAILED */
	}
	mock_gemm(d->transa != 0, d->transb != 0, m, n, (int64_t)k, *(const float *)alpha, A, a->type, a->ld, B, b->type,
	          b->ld, 0.0f, pre, pre, MOCK_R_32F, m > 0 ? m : 1, NULL);
	float bt = *(const float *)beta;
	for (int64_t j = 0; j < n; j++) {
		for (int64_t i = 0; i < m; i++) {
			float v = pre[i + j * m];
			if (bt != 0) {
				v += bt * mock_get(C, dl->type, i + j * dl->ld);
			}
			if (bias != NULL) {
				v += mock_get(bias, dl->type, i);
			}
			if (has_aux(d->epilogue)) {
				mock_put(d->aux, dl->type, i + j * d->aux_ld, v);
			}
			float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
			mock_put(D, dl->type, i + j * dl->ld, 0.5f * v * (1.0f + tanhf(u)));
		}
	}
	free(pre);
	return ST_OK;
}
