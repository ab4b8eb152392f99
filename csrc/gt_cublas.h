/*
 * gt_cublas.h: our own declarations of the parts of cuBLAS and cuBLASLt that
 * gotrain calls, written from the published ABI (cublas_api.h, cublasLt.h,
 * library_types.h of CUDA 11.8, 12.x and 13.0, whose values agree), plus
 * tables of dlsym'd function pointers and static inline trampolines,
 * because cgo cannot call a C function pointer directly.
 *
 * Only the exported C names are used: the C++-only overloads of
 * cublasGemmEx are static inline in the vendor header and never exported.
 * cudaStream_t is the driver's CUstream (the same struct pointer), so a
 * stream created through libcuda goes to cuBLAS unchanged.
 *
 * Include gt_dl.h first.
 */
#ifndef GT_CUBLAS_H
#define GT_CUBLAS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- types ------------------------------------------------------------ */

typedef struct gt_cublasContext *gt_cublasHandle_t;
typedef struct gt_cublasLtContext *gt_cublasLtHandle_t;
typedef struct gt_cublasLtMatmulDescOpaque *gt_cublasLtMatmulDesc_t;
typedef struct gt_cublasLtMatrixLayoutOpaque *gt_cublasLtMatrixLayout_t;
typedef struct gt_cublasLtMatmulPreferenceOpaque *gt_cublasLtMatmulPreference_t;
typedef struct gt_CUstream_st *gt_cudaStream_t;

/* cublasStatus_t */
typedef int gt_cublasStatus_t;
enum {
	GT_CUBLAS_STATUS_SUCCESS = 0,
	GT_CUBLAS_STATUS_NOT_INITIALIZED = 1,
	GT_CUBLAS_STATUS_ALLOC_FAILED = 3,
	GT_CUBLAS_STATUS_INVALID_VALUE = 7,
	GT_CUBLAS_STATUS_ARCH_MISMATCH = 8,
	GT_CUBLAS_STATUS_MAPPING_ERROR = 11,
	GT_CUBLAS_STATUS_EXECUTION_FAILED = 13,
	GT_CUBLAS_STATUS_INTERNAL_ERROR = 14,
	GT_CUBLAS_STATUS_NOT_SUPPORTED = 15,
	GT_CUBLAS_STATUS_LICENSE_ERROR = 16
};

/* cublasOperation_t */
typedef int gt_cublasOperation_t;
enum { GT_CUBLAS_OP_N = 0, GT_CUBLAS_OP_T = 1, GT_CUBLAS_OP_C = 2 };

/* cudaDataType_t (library_types.h) */
typedef int gt_cudaDataType_t;
enum {
	GT_CUDA_R_32F = 0,
	GT_CUDA_R_64F = 1,
	GT_CUDA_R_16F = 2,
	GT_CUDA_R_8I = 3,
	GT_CUDA_R_32I = 10,
	GT_CUDA_R_16BF = 14
};

/* libraryPropertyType_t (library_types.h) */
typedef int gt_libraryPropertyType_t;
enum { GT_MAJOR_VERSION = 0, GT_MINOR_VERSION = 1, GT_PATCH_LEVEL = 2 };

/* cublasComputeType_t */
typedef int gt_cublasComputeType_t;
enum {
	GT_CUBLAS_COMPUTE_16F = 64,
	GT_CUBLAS_COMPUTE_16F_PEDANTIC = 65,
	GT_CUBLAS_COMPUTE_32F = 68,
	GT_CUBLAS_COMPUTE_32F_PEDANTIC = 69,
	GT_CUBLAS_COMPUTE_64F = 70,
	GT_CUBLAS_COMPUTE_64F_PEDANTIC = 71,
	GT_CUBLAS_COMPUTE_32I = 72,
	GT_CUBLAS_COMPUTE_32I_PEDANTIC = 73,
	GT_CUBLAS_COMPUTE_32F_FAST_16F = 74,
	GT_CUBLAS_COMPUTE_32F_FAST_16BF = 75,
	GT_CUBLAS_COMPUTE_32F_FAST_TF32 = 77
};

/* cublasGemmAlgo_t */
typedef int gt_cublasGemmAlgo_t;
enum { GT_CUBLAS_GEMM_DEFAULT = -1, GT_CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99 };

/* cublasMath_t (a bit set: the last value is OR-ed with a mode) */
typedef int gt_cublasMath_t;
enum {
	GT_CUBLAS_DEFAULT_MATH = 0,
	GT_CUBLAS_TENSOR_OP_MATH = 1,
	GT_CUBLAS_PEDANTIC_MATH = 2,
	GT_CUBLAS_TF32_TENSOR_OP_MATH = 3,
	GT_CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16
};

/* cuBLASLt attributes and epilogues (cublasLt.h); every attribute enum is
 * a C enum, so int-sized. The comment says the attribute's value type. */
enum {
	GT_CUBLASLT_MATMUL_DESC_TRANSA = 3,                /* int32_t (cublasOperation_t) */
	GT_CUBLASLT_MATMUL_DESC_TRANSB = 4,                /* int32_t (cublasOperation_t) */
	GT_CUBLASLT_MATMUL_DESC_EPILOGUE = 7,              /* uint32_t (cublasLtEpilogue_t) */
	GT_CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,          /* void * (device) */
	GT_CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11, /* void * (device) */
	GT_CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,      /* int64_t, in elements */
	GT_CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26        /* int32_t (cudaDataType_t); default -1: D's type */
};
enum {
	GT_CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,         /* int32_t */
	GT_CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6 /* int64_t, in elements */
};
enum {
	GT_CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1, /* uint64_t */
	/* uint32_t each, default 256: the heuristic only offers algorithms that
	 * work with buffers this aligned. */
	GT_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
	GT_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
	GT_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
	GT_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8
};
enum {
	GT_CUBLASLT_EPILOGUE_DEFAULT = 1,
	GT_CUBLASLT_EPILOGUE_RELU = 2,
	GT_CUBLASLT_EPILOGUE_BIAS = 4,
	GT_CUBLASLT_EPILOGUE_GELU = 32,
	GT_CUBLASLT_EPILOGUE_GELU_BIAS = 36,
	GT_CUBLASLT_EPILOGUE_GELU_AUX = 160,     /* GELU, the input of the GELU stored to the aux buffer */
	GT_CUBLASLT_EPILOGUE_GELU_AUX_BIAS = 164 /* GELU_AUX after the bias */
};

typedef struct {
	uint64_t data[8];
} gt_cublasLtMatmulAlgo_t;

typedef struct {
	gt_cublasLtMatmulAlgo_t algo;
	size_t workspaceSize;
	gt_cublasStatus_t state;
	float wavesCount;
	int reserved[4];
} gt_cublasLtMatmulHeuristicResult_t;

/* cuBLASLt fills these by the layout of its own header (unchanged from
 * 11.x to 13.0); a size that differs would corrupt the heuristic result. */
_Static_assert(sizeof(gt_cublasLtMatmulAlgo_t) == 64, "cublasLtMatmulAlgo_t is uint64_t[8]");
_Static_assert(offsetof(gt_cublasLtMatmulHeuristicResult_t, workspaceSize) == 64 &&
                   sizeof(gt_cublasLtMatmulHeuristicResult_t) == 96,
               "cublasLtMatmulHeuristicResult_t layout (LP64)");

/* ---- cuBLAS function pointer types ------------------------------------ */

typedef gt_cublasStatus_t (*gt_cublasCreate_fn)(gt_cublasHandle_t *handle);
typedef gt_cublasStatus_t (*gt_cublasDestroy_fn)(gt_cublasHandle_t handle);
typedef gt_cublasStatus_t (*gt_cublasGetVersion_fn)(gt_cublasHandle_t handle, int *version);
typedef gt_cublasStatus_t (*gt_cublasGetProperty_fn)(gt_libraryPropertyType_t type, int *value);
typedef gt_cublasStatus_t (*gt_cublasSetStream_fn)(gt_cublasHandle_t handle, gt_cudaStream_t stream);
typedef gt_cublasStatus_t (*gt_cublasGetStream_fn)(gt_cublasHandle_t handle, gt_cudaStream_t *stream);
typedef gt_cublasStatus_t (*gt_cublasSetMathMode_fn)(gt_cublasHandle_t handle, gt_cublasMath_t mode);
typedef gt_cublasStatus_t (*gt_cublasGetMathMode_fn)(gt_cublasHandle_t handle, gt_cublasMath_t *mode);
typedef gt_cublasStatus_t (*gt_cublasSetWorkspace_fn)(gt_cublasHandle_t handle, void *workspace, size_t bytes);
typedef const char *(*gt_cublasGetStatusString_fn)(gt_cublasStatus_t status);
typedef gt_cublasStatus_t (*gt_cublasGemmEx_fn)(
	gt_cublasHandle_t handle, gt_cublasOperation_t transa, gt_cublasOperation_t transb,
	int m, int n, int k, const void *alpha,
	const void *A, gt_cudaDataType_t Atype, int lda,
	const void *B, gt_cudaDataType_t Btype, int ldb,
	const void *beta, void *C, gt_cudaDataType_t Ctype, int ldc,
	gt_cublasComputeType_t computeType, gt_cublasGemmAlgo_t algo);
typedef gt_cublasStatus_t (*gt_cublasGemmStridedBatchedEx_fn)(
	gt_cublasHandle_t handle, gt_cublasOperation_t transa, gt_cublasOperation_t transb,
	int m, int n, int k, const void *alpha,
	const void *A, gt_cudaDataType_t Atype, int lda, long long int strideA,
	const void *B, gt_cudaDataType_t Btype, int ldb, long long int strideB,
	const void *beta, void *C, gt_cudaDataType_t Ctype, int ldc, long long int strideC,
	int batchCount, gt_cublasComputeType_t computeType, gt_cublasGemmAlgo_t algo);

/* The resolved cuBLAS entry points. The optional ones (NULL when absent)
 * appeared in cuBLAS 11.4.2; without them errors fall back to our names. */
typedef struct {
	void *create;              /* cublasCreate_v2 */
	void *destroy;             /* cublasDestroy_v2 */
	void *get_version;         /* cublasGetVersion_v2 */
	void *get_property;        /* cublasGetProperty */
	void *set_stream;          /* cublasSetStream_v2 */
	void *get_stream;          /* cublasGetStream_v2 */
	void *set_math_mode;       /* cublasSetMathMode */
	void *get_math_mode;       /* cublasGetMathMode */
	void *set_workspace;       /* cublasSetWorkspace_v2 */
	void *gemm_ex;             /* cublasGemmEx */
	void *gemm_strided_ex;     /* cublasGemmStridedBatchedEx */
	void *get_status_string;   /* cublasGetStatusString, optional */
	void *get_status_name;     /* cublasGetStatusName, optional */
} gt_cublas_fns;

/* gt_cublas_resolve fills f from an opened library and returns how many
 * required symbols are missing; lib->err then names each of them. */
static inline int gt_cublas_resolve(gt_dl_lib *lib, gt_cublas_fns *f) {
	int missing = 0;
#define GT_CUBLAS_REQ(field, name) \
	if ((f->field = gt_dl_sym(lib, name)) == NULL) missing++;
	GT_CUBLAS_REQ(create, "cublasCreate_v2")
	GT_CUBLAS_REQ(destroy, "cublasDestroy_v2")
	GT_CUBLAS_REQ(get_version, "cublasGetVersion_v2")
	GT_CUBLAS_REQ(get_property, "cublasGetProperty")
	GT_CUBLAS_REQ(set_stream, "cublasSetStream_v2")
	GT_CUBLAS_REQ(get_stream, "cublasGetStream_v2")
	GT_CUBLAS_REQ(set_math_mode, "cublasSetMathMode")
	GT_CUBLAS_REQ(get_math_mode, "cublasGetMathMode")
	GT_CUBLAS_REQ(set_workspace, "cublasSetWorkspace_v2")
	GT_CUBLAS_REQ(gemm_ex, "cublasGemmEx")
	GT_CUBLAS_REQ(gemm_strided_ex, "cublasGemmStridedBatchedEx")
#undef GT_CUBLAS_REQ
	if (missing == 0) {
		/* Optional: a failed lookup must not read as a load failure. */
		size_t keep = strlen(lib->err);
		f->get_status_string = gt_dl_sym(lib, "cublasGetStatusString");
		f->get_status_name = gt_dl_sym(lib, "cublasGetStatusName");
		lib->err[keep] = '\0';
	}
	return missing;
}

/* ---- cuBLAS trampolines ----------------------------------------------- */

static inline gt_cublasStatus_t gt_cublas_create(const gt_cublas_fns *f, gt_cublasHandle_t *h) {
	return ((gt_cublasCreate_fn)f->create)(h);
}

static inline gt_cublasStatus_t gt_cublas_destroy(const gt_cublas_fns *f, gt_cublasHandle_t h) {
	return ((gt_cublasDestroy_fn)f->destroy)(h);
}

static inline gt_cublasStatus_t gt_cublas_get_version(const gt_cublas_fns *f, gt_cublasHandle_t h, int *v) {
	return ((gt_cublasGetVersion_fn)f->get_version)(h, v);
}

static inline gt_cublasStatus_t gt_cublas_get_property(const gt_cublas_fns *f, gt_libraryPropertyType_t t, int *v) {
	return ((gt_cublasGetProperty_fn)f->get_property)(t, v);
}

/* Streams cross as uintptr_t: the Go side holds them as integers. */
static inline gt_cublasStatus_t gt_cublas_set_stream(const gt_cublas_fns *f, gt_cublasHandle_t h, uintptr_t s) {
	return ((gt_cublasSetStream_fn)f->set_stream)(h, (gt_cudaStream_t)s);
}

static inline gt_cublasStatus_t gt_cublas_get_stream(const gt_cublas_fns *f, gt_cublasHandle_t h, uintptr_t *s) {
	gt_cudaStream_t st = NULL;
	gt_cublasStatus_t rc = ((gt_cublasGetStream_fn)f->get_stream)(h, &st);
	*s = (uintptr_t)st;
	return rc;
}

static inline gt_cublasStatus_t gt_cublas_set_math_mode(const gt_cublas_fns *f, gt_cublasHandle_t h, gt_cublasMath_t m) {
	return ((gt_cublasSetMathMode_fn)f->set_math_mode)(h, m);
}

static inline gt_cublasStatus_t gt_cublas_get_math_mode(const gt_cublas_fns *f, gt_cublasHandle_t h, gt_cublasMath_t *m) {
	return ((gt_cublasGetMathMode_fn)f->get_math_mode)(h, m);
}

/* Device pointers cross as uint64_t (CUdeviceptr). */
static inline gt_cublasStatus_t gt_cublas_set_workspace(const gt_cublas_fns *f, gt_cublasHandle_t h, uint64_t ws, size_t bytes) {
	return ((gt_cublasSetWorkspace_fn)f->set_workspace)(h, (void *)(uintptr_t)ws, bytes);
}

/* gt_cublas_status_string is NULL when the library lacks the call. */
static inline const char *gt_cublas_status_string(const gt_cublas_fns *f, gt_cublasStatus_t s) {
	if (f->get_status_string == NULL) {
		return NULL;
	}
	return ((gt_cublasGetStatusString_fn)f->get_status_string)(s);
}

static inline const char *gt_cublas_status_name(const gt_cublas_fns *f, gt_cublasStatus_t s) {
	if (f->get_status_name == NULL) {
		return NULL;
	}
	return ((gt_cublasGetStatusString_fn)f->get_status_name)(s);
}

/* alpha and beta are host floats: every compute type gotrain uses scales
 * in fp32, and the handle's pointer mode stays CUBLAS_POINTER_MODE_HOST. */
static inline gt_cublasStatus_t gt_cublas_gemm_ex(
	const gt_cublas_fns *f, gt_cublasHandle_t h, gt_cublasOperation_t ta, gt_cublasOperation_t tb,
	int m, int n, int k, float alpha,
	uint64_t A, gt_cudaDataType_t at, int lda,
	uint64_t B, gt_cudaDataType_t bt, int ldb,
	float beta, uint64_t C, gt_cudaDataType_t ct, int ldc,
	gt_cublasComputeType_t compute, gt_cublasGemmAlgo_t algo) {
	return ((gt_cublasGemmEx_fn)f->gemm_ex)(h, ta, tb, m, n, k, &alpha,
		(const void *)(uintptr_t)A, at, lda, (const void *)(uintptr_t)B, bt, ldb,
		&beta, (void *)(uintptr_t)C, ct, ldc, compute, algo);
}

static inline gt_cublasStatus_t gt_cublas_gemm_strided_batched_ex(
	const gt_cublas_fns *f, gt_cublasHandle_t h, gt_cublasOperation_t ta, gt_cublasOperation_t tb,
	int m, int n, int k, float alpha,
	uint64_t A, gt_cudaDataType_t at, int lda, long long sa,
	uint64_t B, gt_cudaDataType_t bt, int ldb, long long sb,
	float beta, uint64_t C, gt_cudaDataType_t ct, int ldc, long long sc,
	int batch, gt_cublasComputeType_t compute, gt_cublasGemmAlgo_t algo) {
	return ((gt_cublasGemmStridedBatchedEx_fn)f->gemm_strided_ex)(h, ta, tb, m, n, k, &alpha,
		(const void *)(uintptr_t)A, at, lda, sa, (const void *)(uintptr_t)B, bt, ldb, sb,
		&beta, (void *)(uintptr_t)C, ct, ldc, sc, batch, compute, algo);
}

/* ---- cuBLASLt --------------------------------------------------------- */

typedef gt_cublasStatus_t (*gt_cublasLtCreate_fn)(gt_cublasLtHandle_t *h);
typedef gt_cublasStatus_t (*gt_cublasLtDestroy_fn)(gt_cublasLtHandle_t h);
typedef size_t (*gt_cublasLtGetVersion_fn)(void);
typedef gt_cublasStatus_t (*gt_cublasLtMatmulDescCreate_fn)(gt_cublasLtMatmulDesc_t *desc,
                                                            gt_cublasComputeType_t compute, gt_cudaDataType_t scale);
typedef gt_cublasStatus_t (*gt_cublasLtMatmulDescDestroy_fn)(gt_cublasLtMatmulDesc_t desc);
typedef gt_cublasStatus_t (*gt_cublasLtMatmulDescSetAttribute_fn)(gt_cublasLtMatmulDesc_t desc, int attr,
                                                                  const void *buf, size_t size);
typedef gt_cublasStatus_t (*gt_cublasLtMatrixLayoutCreate_fn)(gt_cublasLtMatrixLayout_t *layout, gt_cudaDataType_t type,
                                                              uint64_t rows, uint64_t cols, int64_t ld);
typedef gt_cublasStatus_t (*gt_cublasLtMatrixLayoutDestroy_fn)(gt_cublasLtMatrixLayout_t layout);
typedef gt_cublasStatus_t (*gt_cublasLtMatrixLayoutSetAttribute_fn)(gt_cublasLtMatrixLayout_t layout, int attr,
                                                                    const void *buf, size_t size);
typedef gt_cublasStatus_t (*gt_cublasLtMatmulPreferenceCreate_fn)(gt_cublasLtMatmulPreference_t *pref);
typedef gt_cublasStatus_t (*gt_cublasLtMatmulPreferenceDestroy_fn)(gt_cublasLtMatmulPreference_t pref);
typedef gt_cublasStatus_t (*gt_cublasLtMatmulPreferenceSetAttribute_fn)(gt_cublasLtMatmulPreference_t pref, int attr,
                                                                        const void *buf, size_t size);
typedef gt_cublasStatus_t (*gt_cublasLtMatmulAlgoGetHeuristic_fn)(
	gt_cublasLtHandle_t h, gt_cublasLtMatmulDesc_t desc, gt_cublasLtMatrixLayout_t a, gt_cublasLtMatrixLayout_t b,
	gt_cublasLtMatrixLayout_t c, gt_cublasLtMatrixLayout_t d, gt_cublasLtMatmulPreference_t pref,
	int requested, gt_cublasLtMatmulHeuristicResult_t results[], int *returned);
typedef gt_cublasStatus_t (*gt_cublasLtMatmul_fn)(
	gt_cublasLtHandle_t h, gt_cublasLtMatmulDesc_t desc, const void *alpha, const void *A, gt_cublasLtMatrixLayout_t adesc,
	const void *B, gt_cublasLtMatrixLayout_t bdesc, const void *beta, const void *C, gt_cublasLtMatrixLayout_t cdesc,
	void *D, gt_cublasLtMatrixLayout_t ddesc, const gt_cublasLtMatmulAlgo_t *algo, void *workspace, size_t wsbytes,
	gt_cudaStream_t stream);

typedef struct {
	void *create;           /* cublasLtCreate */
	void *destroy;          /* cublasLtDestroy */
	void *get_version;      /* cublasLtGetVersion */
	void *desc_create;      /* cublasLtMatmulDescCreate */
	void *desc_destroy;     /* cublasLtMatmulDescDestroy */
	void *desc_set;         /* cublasLtMatmulDescSetAttribute */
	void *layout_create;    /* cublasLtMatrixLayoutCreate */
	void *layout_destroy;   /* cublasLtMatrixLayoutDestroy */
	void *layout_set;       /* cublasLtMatrixLayoutSetAttribute */
	void *pref_create;      /* cublasLtMatmulPreferenceCreate */
	void *pref_destroy;     /* cublasLtMatmulPreferenceDestroy */
	void *pref_set;         /* cublasLtMatmulPreferenceSetAttribute */
	void *heuristic;        /* cublasLtMatmulAlgoGetHeuristic */
	void *matmul;           /* cublasLtMatmul */
} gt_cublaslt_fns;

static inline int gt_cublaslt_resolve(gt_dl_lib *lib, gt_cublaslt_fns *f) {
	int missing = 0;
#define GT_CUBLASLT_REQ(field, name) \
	if ((f->field = gt_dl_sym(lib, name)) == NULL) missing++;
	GT_CUBLASLT_REQ(create, "cublasLtCreate")
	GT_CUBLASLT_REQ(destroy, "cublasLtDestroy")
	GT_CUBLASLT_REQ(get_version, "cublasLtGetVersion")
	GT_CUBLASLT_REQ(desc_create, "cublasLtMatmulDescCreate")
	GT_CUBLASLT_REQ(desc_destroy, "cublasLtMatmulDescDestroy")
	GT_CUBLASLT_REQ(desc_set, "cublasLtMatmulDescSetAttribute")
	GT_CUBLASLT_REQ(layout_create, "cublasLtMatrixLayoutCreate")
	GT_CUBLASLT_REQ(layout_destroy, "cublasLtMatrixLayoutDestroy")
	GT_CUBLASLT_REQ(layout_set, "cublasLtMatrixLayoutSetAttribute")
	GT_CUBLASLT_REQ(pref_create, "cublasLtMatmulPreferenceCreate")
	GT_CUBLASLT_REQ(pref_destroy, "cublasLtMatmulPreferenceDestroy")
	GT_CUBLASLT_REQ(pref_set, "cublasLtMatmulPreferenceSetAttribute")
	GT_CUBLASLT_REQ(heuristic, "cublasLtMatmulAlgoGetHeuristic")
	GT_CUBLASLT_REQ(matmul, "cublasLtMatmul")
#undef GT_CUBLASLT_REQ
	return missing;
}

static inline gt_cublasStatus_t gt_cublaslt_create(const gt_cublaslt_fns *f, gt_cublasLtHandle_t *h) {
	return ((gt_cublasLtCreate_fn)f->create)(h);
}

static inline gt_cublasStatus_t gt_cublaslt_destroy(const gt_cublaslt_fns *f, gt_cublasLtHandle_t h) {
	return ((gt_cublasLtDestroy_fn)f->destroy)(h);
}

static inline size_t gt_cublaslt_get_version(const gt_cublaslt_fns *f) {
	return ((gt_cublasLtGetVersion_fn)f->get_version)();
}

/* A matmul plan: the descriptor, layouts and heuristic result of one
 * product shape, made once (gt_cublaslt_plan_create) and run many times
 * (gt_cublaslt_plan_run), only the pointers changing between runs:
 *   D = epilogue(alpha*op(A)*op(B) + beta*C [+ bias broadcast along D's columns])
 * C and D share one layout (ldc), as cuBLASLt requires for in-place use.
 * The epilogue is DEFAULT, BIAS, GELU, GELU_BIAS, GELU_AUX or GELU_AUX_BIAS;
 * with a bias, its element type is set explicitly (BIAS_DATA_TYPE), and
 * with an aux buffer (the GELU's input, D's type) its leading dimension.
 * The preference carries the workspace size and the alignment of the
 * buffers the plan will see, so the algorithm works with them. stage
 * reports which step failed, for the error message: 1 desc, 2 layouts,
 * 3 preference, 4 heuristic (no algorithm), 5 matmul, 6 setting the
 * run's pointers. */
typedef struct {
	gt_cublasOperation_t transa, transb;
	uint64_t m, n, k;
	gt_cudaDataType_t atype, btype, ctype;
	int64_t lda, ldb, ldc;
	uint32_t epilogue;
	gt_cudaDataType_t bias_type; /* with a BIAS epilogue */
	int64_t aux_ld;              /* with an AUX epilogue */
	uint32_t align_a, align_b, align_c, align_d;
	uint64_t workspace_bytes;
	gt_cublasComputeType_t compute;
} gt_cublaslt_plan_args;

typedef struct {
	gt_cublasLtMatmulDesc_t desc;
	gt_cublasLtMatrixLayout_t la, lb, lc;
	gt_cublasLtMatmulAlgo_t algo;
	uint32_t epilogue;
} gt_cublaslt_plan;

static inline int gt_cublaslt_epilogue_has_bias(uint32_t e) {
	return e == GT_CUBLASLT_EPILOGUE_BIAS || e == GT_CUBLASLT_EPILOGUE_GELU_BIAS || e == GT_CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}

static inline int gt_cublaslt_epilogue_has_aux(uint32_t e) {
	return e == GT_CUBLASLT_EPILOGUE_GELU_AUX || e == GT_CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
}

/* gt_cublaslt_plan_destroy releases what a plan holds (best effort) and
 * zeroes it. */
static inline void gt_cublaslt_plan_destroy(const gt_cublaslt_fns *f, gt_cublaslt_plan *p) {
	if (p->lc) ((gt_cublasLtMatrixLayoutDestroy_fn)f->layout_destroy)(p->lc);
	if (p->lb) ((gt_cublasLtMatrixLayoutDestroy_fn)f->layout_destroy)(p->lb);
	if (p->la) ((gt_cublasLtMatrixLayoutDestroy_fn)f->layout_destroy)(p->la);
	if (p->desc) ((gt_cublasLtMatmulDescDestroy_fn)f->desc_destroy)(p->desc);
	memset(p, 0, sizeof(*p));
}

static inline gt_cublasStatus_t gt_cublaslt_plan_create(const gt_cublaslt_fns *f, gt_cublasLtHandle_t h,
                                                        const gt_cublaslt_plan_args *a, gt_cublaslt_plan *p, int *stage) {
	gt_cublasLtMatmulPreference_t pref = NULL;
	gt_cublasStatus_t rc;
	int32_t ta = a->transa, tb = a->transb;
	uint32_t epi = a->epilogue;
	int32_t bias_type = a->bias_type;
	int64_t aux_ld = a->aux_ld;
	uint64_t wsmax = a->workspace_bytes;
	uint32_t align[4] = {a->align_a, a->align_b, a->align_c, a->align_d};
	gt_cublasLtMatmulHeuristicResult_t heur;
	int found = 0;
	/* A is m×k after op, so stored k×m when transposed; likewise B. */
	uint64_t arows = ta == GT_CUBLAS_OP_N ? a->m : a->k, acols = ta == GT_CUBLAS_OP_N ? a->k : a->m;
	uint64_t brows = tb == GT_CUBLAS_OP_N ? a->k : a->n, bcols = tb == GT_CUBLAS_OP_N ? a->n : a->k;

	memset(p, 0, sizeof(*p));
	p->epilogue = epi;
	*stage = 1;
	rc = ((gt_cublasLtMatmulDescCreate_fn)f->desc_create)(&p->desc, a->compute, GT_CUDA_R_32F);
	if (rc) goto out;
	rc = ((gt_cublasLtMatmulDescSetAttribute_fn)f->desc_set)(p->desc, GT_CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
	if (rc) goto out;
	rc = ((gt_cublasLtMatmulDescSetAttribute_fn)f->desc_set)(p->desc, GT_CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
	if (rc) goto out;
	rc = ((gt_cublasLtMatmulDescSetAttribute_fn)f->desc_set)(p->desc, GT_CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
	if (rc) goto out;
	if (gt_cublaslt_epilogue_has_bias(epi)) {
		rc = ((gt_cublasLtMatmulDescSetAttribute_fn)f->desc_set)(p->desc, GT_CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type));
		if (rc) goto out;
	}
	if (gt_cublaslt_epilogue_has_aux(epi)) {
		rc = ((gt_cublasLtMatmulDescSetAttribute_fn)f->desc_set)(p->desc, GT_CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld));
		if (rc) goto out;
	}
	*stage = 2;
	rc = ((gt_cublasLtMatrixLayoutCreate_fn)f->layout_create)(&p->la, a->atype, arows, acols, a->lda);
	if (rc) goto out;
	rc = ((gt_cublasLtMatrixLayoutCreate_fn)f->layout_create)(&p->lb, a->btype, brows, bcols, a->ldb);
	if (rc) goto out;
	rc = ((gt_cublasLtMatrixLayoutCreate_fn)f->layout_create)(&p->lc, a->ctype, a->m, a->n, a->ldc);
	if (rc) goto out;
	*stage = 3;
	rc = ((gt_cublasLtMatmulPreferenceCreate_fn)f->pref_create)(&pref);
	if (rc) goto out;
	rc = ((gt_cublasLtMatmulPreferenceSetAttribute_fn)f->pref_set)(pref, GT_CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsmax, sizeof(wsmax));
	if (rc) goto out;
	for (int i = 0; i < 4; i++) {
		rc = ((gt_cublasLtMatmulPreferenceSetAttribute_fn)f->pref_set)(pref, GT_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES + i, &align[i], sizeof(align[i]));
		if (rc) goto out;
	}
	*stage = 4;
	memset(&heur, 0, sizeof(heur));
	rc = ((gt_cublasLtMatmulAlgoGetHeuristic_fn)f->heuristic)(h, p->desc, p->la, p->lb, p->lc, p->lc, pref, 1, &heur, &found);
	if (rc) goto out;
	if (found < 1) {
		rc = GT_CUBLAS_STATUS_NOT_SUPPORTED;
		goto out;
	}
	p->algo = heur.algo;
out:
	if (pref) ((gt_cublasLtMatmulPreferenceDestroy_fn)f->pref_destroy)(pref);
	if (rc) gt_cublaslt_plan_destroy(f, p);
	return rc;
}

/* gt_cublaslt_plan_run runs plan p on the given buffers: it sets the bias
 * and aux pointers the epilogue reads and writes on the plan's descriptor
 * (host-side, no synchronisation), then queues cublasLtMatmul. */
static inline gt_cublasStatus_t gt_cublaslt_plan_run(const gt_cublaslt_fns *f, gt_cublasLtHandle_t h, gt_cublaslt_plan *p,
                                                     float alpha, float beta, uint64_t A, uint64_t B, uint64_t C, uint64_t D,
                                                     uint64_t bias, uint64_t aux, uint64_t workspace, size_t ws_bytes,
                                                     uintptr_t stream, int *stage) {
	gt_cublasStatus_t rc;
	void *bp = (void *)(uintptr_t)bias, *xp = (void *)(uintptr_t)aux;
	*stage = 6;
	if (gt_cublaslt_epilogue_has_bias(p->epilogue)) {
		rc = ((gt_cublasLtMatmulDescSetAttribute_fn)f->desc_set)(p->desc, GT_CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof(bp));
		if (rc) return rc;
	}
	if (gt_cublaslt_epilogue_has_aux(p->epilogue)) {
		rc = ((gt_cublasLtMatmulDescSetAttribute_fn)f->desc_set)(p->desc, GT_CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &xp, sizeof(xp));
		if (rc) return rc;
	}
	*stage = 5;
	return ((gt_cublasLtMatmul_fn)f->matmul)(h, p->desc, &alpha, (const void *)(uintptr_t)A, p->la,
		(const void *)(uintptr_t)B, p->lb, &beta, (const void *)(uintptr_t)C, p->lc,
		(void *)(uintptr_t)D, p->lc, &p->algo, (void *)(uintptr_t)workspace, ws_bytes, (gt_cudaStream_t)stream);
}

#endif /* GT_CUBLAS_H */
