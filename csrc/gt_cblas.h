/*
 * gt_cblas.h: our own declarations of the parts of the CBLAS and OpenBLAS
 * C APIs gotrain calls, written from the published ABI (no vendor header),
 * plus static inline trampolines, because cgo cannot call a C function
 * pointer directly.
 *
 * Integer arguments are C int: the LP64 OpenBLAS builds that distributions
 * ship as libopenblas.so.0. ILP64 builds (libopenblas64_) export other
 * symbol names and are not loaded.
 */
#ifndef GT_CBLAS_H
#define GT_CBLAS_H

/* CBLAS enum values, fixed by the CBLAS standard. */
typedef enum { CblasRowMajor = 101, CblasColMajor = 102 } gt_cblas_layout;
typedef enum { CblasNoTrans = 111, CblasTrans = 112, CblasConjTrans = 113 } gt_cblas_transpose;

/* void cblas_sgemm(layout, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) */
typedef void (*gt_cblas_sgemm_fn)(gt_cblas_layout layout, gt_cblas_transpose transa, gt_cblas_transpose transb,
                                  int m, int n, int k, float alpha, const float *a, int lda,
                                  const float *b, int ldb, float beta, float *c, int ldc);
typedef void (*gt_openblas_set_num_threads_fn)(int num_threads);
typedef int (*gt_openblas_get_num_threads_fn)(void);
typedef char *(*gt_openblas_get_corename_fn)(void);
typedef char *(*gt_openblas_get_config_fn)(void);

static inline void gt_cblas_sgemm(void *fn, gt_cblas_layout layout, gt_cblas_transpose transa,
                                  gt_cblas_transpose transb, int m, int n, int k, float alpha,
                                  const float *a, int lda, const float *b, int ldb, float beta,
                                  float *c, int ldc) {
	((gt_cblas_sgemm_fn)fn)(layout, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static inline void gt_openblas_set_num_threads(void *fn, int num_threads) {
	((gt_openblas_set_num_threads_fn)fn)(num_threads);
}

static inline int gt_openblas_get_num_threads(void *fn) {
	return ((gt_openblas_get_num_threads_fn)fn)();
}

static inline const char *gt_openblas_get_corename(void *fn) {
	return ((gt_openblas_get_corename_fn)fn)();
}

static inline const char *gt_openblas_get_config(void *fn) {
	return ((gt_openblas_get_config_fn)fn)();
}

#endif /* GT_CBLAS_H */
