/*
 * gt_nvrtc.h: our own declarations of the NVRTC API (libnvrtc.so.13 / .12
 * / .11.2) gotrain calls to compile CUDA C to PTX and CUBIN at run time,
 * written from the published ABI (no vendor header; prototypes unchanged
 * from 11.2 to 13.x), plus static inline trampolines, because cgo cannot
 * call a C function pointer directly. NVRTC needs no GPU.
 */
#ifndef GT_NVRTC_H
#define GT_NVRTC_H

#include <stddef.h>
#include <stdlib.h>

typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;

/* nvrtcResult values (nvrtc.h). Later releases append codes: 12.x added
 * 12-16 and 13.0 adds 17 (NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED). Those
 * need no declaration: every code is named by nvrtcGetErrorString. */
#define NVRTC_SUCCESS 0
#define NVRTC_ERROR_OUT_OF_MEMORY 1
#define NVRTC_ERROR_PROGRAM_CREATION_FAILURE 2
#define NVRTC_ERROR_INVALID_INPUT 3
#define NVRTC_ERROR_INVALID_PROGRAM 4
#define NVRTC_ERROR_INVALID_OPTION 5
#define NVRTC_ERROR_COMPILATION 6
#define NVRTC_ERROR_BUILTIN_OPERATION_FAILURE 7
#define NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION 8
#define NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION 9
#define NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID 10
#define NVRTC_ERROR_INTERNAL_ERROR 11

typedef const char *(*gt_nvrtcGetErrorString_fn)(nvrtcResult r);
typedef nvrtcResult (*gt_nvrtcVersion_fn)(int *major, int *minor);
typedef nvrtcResult (*gt_nvrtcGetNumSupportedArchs_fn)(int *n);
typedef nvrtcResult (*gt_nvrtcGetSupportedArchs_fn)(int *archs);
typedef nvrtcResult (*gt_nvrtcCreateProgram_fn)(nvrtcProgram *prog, const char *src, const char *name, int numHeaders,
                                                const char *const *headers, const char *const *includeNames);
typedef nvrtcResult (*gt_nvrtcDestroyProgram_fn)(nvrtcProgram *prog);
typedef nvrtcResult (*gt_nvrtcCompileProgram_fn)(nvrtcProgram prog, int numOptions, const char *const *options);
typedef nvrtcResult (*gt_nvrtcGetSize_fn)(nvrtcProgram prog, size_t *size);
typedef nvrtcResult (*gt_nvrtcGetBytes_fn)(nvrtcProgram prog, char *out);

static inline const char *gt_nvrtcGetErrorString(void *fn, nvrtcResult r) {
	return ((gt_nvrtcGetErrorString_fn)fn)(r);
}

static inline nvrtcResult gt_nvrtcVersion(void *fn, int *major, int *minor) {
	return ((gt_nvrtcVersion_fn)fn)(major, minor);
}

static inline nvrtcResult gt_nvrtcGetNumSupportedArchs(void *fn, int *n) {
	return ((gt_nvrtcGetNumSupportedArchs_fn)fn)(n);
}

static inline nvrtcResult gt_nvrtcGetSupportedArchs(void *fn, int *archs) {
	return ((gt_nvrtcGetSupportedArchs_fn)fn)(archs);
}

/* The sizes of the program's outputs and log, filled by gt_nvrtc_compile. */
typedef struct {
	size_t ptx, cubin, log;
} gt_nvrtc_sizes;

/* gt_nvrtc_compile creates a program from src (no headers), compiles it
 * with the given options and reports the sizes of PTX, CUBIN (0 when only
 * PTX was asked for) and log. *prog stays valid for gt_nvrtc_fetch and
 * gt_nvrtc_destroy even when compilation failed, so the log can be read.
 * *stage says how far it got: 0 create, 1 compile, 2 output sizes.
 * getPTXSize is NULL for a CUBIN build and getCUBINSize for a PTX build
 * (or an NVRTC without CUBIN output): a build asks only for the output it
 * uses, so it never depends on NVRTC keeping the other one. */
static inline nvrtcResult gt_nvrtc_compile(void *create, void *compile, void *getPTXSize, void *getCUBINSize,
                                           void *getLogSize, nvrtcProgram *prog, const char *src, const char *name,
                                           int nopts, const char *const *opts, gt_nvrtc_sizes *sizes,
                                           int *stage) {
	sizes->ptx = sizes->cubin = sizes->log = 0;
	*prog = NULL;
	*stage = 0;
	nvrtcResult r = ((gt_nvrtcCreateProgram_fn)create)(prog, src, name, 0, NULL, NULL);
	if (r != NVRTC_SUCCESS) {
		*prog = NULL;
		return r;
	}
	*stage = 1;
	nvrtcResult cr = ((gt_nvrtcCompileProgram_fn)compile)(*prog, nopts, opts);
	((gt_nvrtcGetSize_fn)getLogSize)(*prog, &sizes->log);
	if (cr != NVRTC_SUCCESS) {
		return cr;
	}
	*stage = 2;
	r = NVRTC_SUCCESS;
	if (getPTXSize != NULL) {
		r = ((gt_nvrtcGetSize_fn)getPTXSize)(*prog, &sizes->ptx);
		if (r != NVRTC_SUCCESS) {
			return r;
		}
	}
	if (getCUBINSize != NULL) {
		r = ((gt_nvrtcGetSize_fn)getCUBINSize)(*prog, &sizes->cubin);
	}
	return r;
}

/* gt_nvrtc_fetch copies one output (PTX, CUBIN or log, by getter) into out,
 * which has room for the size gt_nvrtc_compile reported. */
static inline nvrtcResult gt_nvrtc_fetch(void *getter, nvrtcProgram prog, char *out) {
	return ((gt_nvrtcGetBytes_fn)getter)(prog, out);
}

static inline nvrtcResult gt_nvrtc_destroy(void *destroy, nvrtcProgram *prog) {
	if (*prog == NULL) {
		return NVRTC_SUCCESS;
	}
	return ((gt_nvrtcDestroyProgram_fn)destroy)(prog);
}

#endif /* GT_NVRTC_H */
