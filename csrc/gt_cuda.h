/*
 * gt_cuda.h: our own declarations of the parts of the CUDA driver API
 * (libcuda.so.1) gotrain calls, written from the published ABI (no vendor
 * header), plus static inline trampolines, because cgo cannot call a C
 * function pointer directly.
 *
 * Symbols are always the versioned ones (cuMemAlloc_v2, ...): libcuda still
 * exports the unversioned names with 32-bit sizes and pointers. Every name,
 * prototype and value here is the same in the CUDA 12.x and 13.0 headers,
 * except that 13.0 declares only cuEventElapsedTime_v2 (12.8+), which the
 * Go side resolves first and falls back from. A _vN suffix is not always a
 * newer version of the same call: 13.0's cuCtxSynchronize_v2 and
 * cuCtxGetDevice_v2 take a context argument the unversioned calls lack.
 *
 * Handles (CUcontext, CUstream, CUevent, CUmodule, CUfunction) cross the
 * trampolines as uintptr_t and are cast back here, so Go code keeps them as
 * uintptr without ever converting an integer to unsafe.Pointer. Other
 * headers (cuBLAS, NCCL) take CUstream the same way: CUstream and
 * cudaStream_t are the same type.
 */
#ifndef GT_CUDA_H
#define GT_CUDA_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr; /* CUdeviceptr_v2: 64-bit */
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef int CUdevice_attribute;
typedef int CUfunction_attribute;
typedef int CUjit_option;

/* Device pointers cross to Go as 64-bit integers. */
_Static_assert(sizeof(CUdeviceptr) == 8, "CUdeviceptr is 64-bit (CUdeviceptr_v2)");

/* CUresult values gotrain names (cuda.h). */
#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_DEINITIALIZED 4
#define CUDA_ERROR_NO_DEVICE 100
#define CUDA_ERROR_INVALID_DEVICE 101
#define CUDA_ERROR_INVALID_IMAGE 200
#define CUDA_ERROR_INVALID_CONTEXT 201
#define CUDA_ERROR_INVALID_PTX 218
#define CUDA_ERROR_UNSUPPORTED_PTX_VERSION 222
#define CUDA_ERROR_INVALID_HANDLE 400
#define CUDA_ERROR_NOT_FOUND 500
#define CUDA_ERROR_NOT_READY 600
#define CUDA_ERROR_ILLEGAL_ADDRESS 700
#define CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES 701
#define CUDA_ERROR_LAUNCH_FAILED 719
#define CUDA_ERROR_NOT_SUPPORTED 801
#define CUDA_ERROR_UNKNOWN 999

/* CUdevice_attribute values. */
#define CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK 1
#define CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK 8
#define CU_DEVICE_ATTRIBUTE_WARP_SIZE 10
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN 97

/* CUfunction_attribute values. */
#define CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8

/* Flags. */
#define CU_STREAM_DEFAULT 0
#define CU_STREAM_NON_BLOCKING 1
#define CU_EVENT_DEFAULT 0
#define CU_EVENT_DISABLE_TIMING 2

/* CUjit_option values for cuModuleLoadDataEx's logs. A *_SIZE_BYTES value is
 * passed as the integer itself in the void* slot and is overwritten with the
 * number of bytes written. */
#define CU_JIT_INFO_LOG_BUFFER 3
#define CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES 4
#define CU_JIT_ERROR_LOG_BUFFER 5
#define CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6

/* Function pointer types, one per symbol. */
typedef CUresult (*gt_cuInit_fn)(unsigned int flags);
typedef CUresult (*gt_cuDriverGetVersion_fn)(int *version);
typedef CUresult (*gt_cuGetErrorString_fn)(CUresult error, const char **str);
typedef CUresult (*gt_cuGetErrorName_fn)(CUresult error, const char **str);
typedef CUresult (*gt_cuDeviceGetCount_fn)(int *count);
typedef CUresult (*gt_cuDeviceGet_fn)(CUdevice *device, int ordinal);
typedef CUresult (*gt_cuDeviceGetName_fn)(char *name, int len, CUdevice dev);
typedef CUresult (*gt_cuDeviceGetPCIBusId_fn)(char *busid, int len, CUdevice dev);
typedef CUresult (*gt_cuDeviceGetAttribute_fn)(int *value, CUdevice_attribute attrib, CUdevice dev);
typedef CUresult (*gt_cuDeviceTotalMem_fn)(size_t *bytes, CUdevice dev);
typedef CUresult (*gt_cuDevicePrimaryCtxRetain_fn)(CUcontext *pctx, CUdevice dev);
typedef CUresult (*gt_cuDevicePrimaryCtxRelease_fn)(CUdevice dev);
typedef CUresult (*gt_cuCtxSetCurrent_fn)(CUcontext ctx);
typedef CUresult (*gt_cuCtxGetCurrent_fn)(CUcontext *pctx);
typedef CUresult (*gt_cuCtxSynchronize_fn)(void);
typedef CUresult (*gt_cuMemGetInfo_fn)(size_t *free, size_t *total);
typedef CUresult (*gt_cuMemAlloc_fn)(CUdeviceptr *dptr, size_t bytes);
typedef CUresult (*gt_cuMemFree_fn)(CUdeviceptr dptr);
typedef CUresult (*gt_cuMemAllocHost_fn)(void **pp, size_t bytes);
typedef CUresult (*gt_cuMemFreeHost_fn)(void *p);
typedef CUresult (*gt_cuMemcpyHtoD_fn)(CUdeviceptr dst, const void *src, size_t n);
typedef CUresult (*gt_cuMemcpyDtoH_fn)(void *dst, CUdeviceptr src, size_t n);
typedef CUresult (*gt_cuMemcpyDtoD_fn)(CUdeviceptr dst, CUdeviceptr src, size_t n);
typedef CUresult (*gt_cuMemcpyHtoDAsync_fn)(CUdeviceptr dst, const void *src, size_t n, CUstream s);
typedef CUresult (*gt_cuMemcpyDtoHAsync_fn)(void *dst, CUdeviceptr src, size_t n, CUstream s);
typedef CUresult (*gt_cuMemcpyDtoDAsync_fn)(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);
typedef CUresult (*gt_cuMemsetD8_fn)(CUdeviceptr dst, unsigned char v, size_t n);
typedef CUresult (*gt_cuMemsetD32_fn)(CUdeviceptr dst, unsigned int v, size_t n);
typedef CUresult (*gt_cuMemsetD8Async_fn)(CUdeviceptr dst, unsigned char v, size_t n, CUstream s);
typedef CUresult (*gt_cuStreamCreate_fn)(CUstream *ps, unsigned int flags);
typedef CUresult (*gt_cuStreamDestroy_fn)(CUstream s);
typedef CUresult (*gt_cuStreamSynchronize_fn)(CUstream s);
typedef CUresult (*gt_cuStreamWaitEvent_fn)(CUstream s, CUevent e, unsigned int flags);
typedef CUresult (*gt_cuStreamQuery_fn)(CUstream s);
typedef CUresult (*gt_cuEventCreate_fn)(CUevent *pe, unsigned int flags);
typedef CUresult (*gt_cuEventRecord_fn)(CUevent e, CUstream s);
typedef CUresult (*gt_cuEventSynchronize_fn)(CUevent e);
typedef CUresult (*gt_cuEventDestroy_fn)(CUevent e);
typedef CUresult (*gt_cuEventElapsedTime_fn)(float *ms, CUevent start, CUevent end);
typedef CUresult (*gt_cuModuleLoadDataEx_fn)(CUmodule *m, const void *image, unsigned int n, CUjit_option *opts,
                                              void **vals);
typedef CUresult (*gt_cuModuleGetFunction_fn)(CUfunction *f, CUmodule m, const char *name);
typedef CUresult (*gt_cuModuleUnload_fn)(CUmodule m);
typedef CUresult (*gt_cuFuncSetAttribute_fn)(CUfunction f, CUfunction_attribute attr, int value);
typedef CUresult (*gt_cuLaunchKernel_fn)(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                         unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                                         CUstream s, void **params, void **extra);

/* Trampolines: the first argument is the dlsym'd function pointer. */

static inline CUresult gt_cuInit(void *fn, unsigned int flags) { return ((gt_cuInit_fn)fn)(flags); }

static inline CUresult gt_cuDriverGetVersion(void *fn, int *v) { return ((gt_cuDriverGetVersion_fn)fn)(v); }

/* gt_cuGetErrorString returns NULL for a code the driver does not know. */
static inline const char *gt_cuGetErrorString(void *fn, CUresult r) {
	const char *s = NULL;
	if (fn == NULL || ((gt_cuGetErrorString_fn)fn)(r, &s) != CUDA_SUCCESS) {
		return NULL;
	}
	return s;
}

/* gt_cuGetErrorName returns NULL for a code the driver does not know. */
static inline const char *gt_cuGetErrorName(void *fn, CUresult r) {
	const char *s = NULL;
	if (fn == NULL || ((gt_cuGetErrorName_fn)fn)(r, &s) != CUDA_SUCCESS) {
		return NULL;
	}
	return s;
}

static inline CUresult gt_cuDeviceGetCount(void *fn, int *n) { return ((gt_cuDeviceGetCount_fn)fn)(n); }

static inline CUresult gt_cuDeviceGet(void *fn, CUdevice *d, int ordinal) {
	return ((gt_cuDeviceGet_fn)fn)(d, ordinal);
}

static inline CUresult gt_cuDeviceGetName(void *fn, char *name, int len, CUdevice d) {
	return ((gt_cuDeviceGetName_fn)fn)(name, len, d);
}

static inline CUresult gt_cuDeviceGetPCIBusId(void *fn, char *busid, int len, CUdevice d) {
	return ((gt_cuDeviceGetPCIBusId_fn)fn)(busid, len, d);
}

static inline CUresult gt_cuDeviceGetAttribute(void *fn, int *v, CUdevice_attribute a, CUdevice d) {
	return ((gt_cuDeviceGetAttribute_fn)fn)(v, a, d);
}

static inline CUresult gt_cuDeviceTotalMem(void *fn, size_t *bytes, CUdevice d) {
	return ((gt_cuDeviceTotalMem_fn)fn)(bytes, d);
}

static inline CUresult gt_cuDevicePrimaryCtxRetain(void *fn, uintptr_t *ctx, CUdevice d) {
	CUcontext c = NULL;
	CUresult r = ((gt_cuDevicePrimaryCtxRetain_fn)fn)(&c, d);
	*ctx = (uintptr_t)c;
	return r;
}

static inline CUresult gt_cuDevicePrimaryCtxRelease(void *fn, CUdevice d) {
	return ((gt_cuDevicePrimaryCtxRelease_fn)fn)(d);
}

static inline CUresult gt_cuCtxSetCurrent(void *fn, uintptr_t ctx) {
	return ((gt_cuCtxSetCurrent_fn)fn)((CUcontext)ctx);
}

static inline CUresult gt_cuCtxGetCurrent(void *fn, uintptr_t *ctx) {
	CUcontext c = NULL;
	CUresult r = ((gt_cuCtxGetCurrent_fn)fn)(&c);
	*ctx = (uintptr_t)c;
	return r;
}

static inline CUresult gt_cuCtxSynchronize(void *fn) { return ((gt_cuCtxSynchronize_fn)fn)(); }

static inline CUresult gt_cuMemGetInfo(void *fn, size_t *free, size_t *total) {
	return ((gt_cuMemGetInfo_fn)fn)(free, total);
}

static inline CUresult gt_cuMemAlloc(void *fn, CUdeviceptr *p, size_t n) { return ((gt_cuMemAlloc_fn)fn)(p, n); }

static inline CUresult gt_cuMemFree(void *fn, CUdeviceptr p) { return ((gt_cuMemFree_fn)fn)(p); }

static inline CUresult gt_cuMemAllocHost(void *fn, void **p, size_t n) { return ((gt_cuMemAllocHost_fn)fn)(p, n); }

static inline CUresult gt_cuMemFreeHost(void *fn, void *p) { return ((gt_cuMemFreeHost_fn)fn)(p); }

static inline CUresult gt_cuMemcpyHtoD(void *fn, CUdeviceptr dst, const void *src, size_t n) {
	return ((gt_cuMemcpyHtoD_fn)fn)(dst, src, n);
}

static inline CUresult gt_cuMemcpyDtoH(void *fn, void *dst, CUdeviceptr src, size_t n) {
	return ((gt_cuMemcpyDtoH_fn)fn)(dst, src, n);
}

static inline CUresult gt_cuMemcpyDtoD(void *fn, CUdeviceptr dst, CUdeviceptr src, size_t n) {
	return ((gt_cuMemcpyDtoD_fn)fn)(dst, src, n);
}

/* Async copies read or write host memory after the call returns: it must
 * be C or pinned memory that outlives the copy, never Go memory. */
static inline CUresult gt_cuMemcpyHtoDAsync(void *fn, CUdeviceptr dst, const void *src, size_t n, uintptr_t s) {
	return ((gt_cuMemcpyHtoDAsync_fn)fn)(dst, src, n, (CUstream)s);
}

static inline CUresult gt_cuMemcpyDtoHAsync(void *fn, void *dst, CUdeviceptr src, size_t n, uintptr_t s) {
	return ((gt_cuMemcpyDtoHAsync_fn)fn)(dst, src, n, (CUstream)s);
}

static inline CUresult gt_cuMemcpyDtoDAsync(void *fn, CUdeviceptr dst, CUdeviceptr src, size_t n, uintptr_t s) {
	return ((gt_cuMemcpyDtoDAsync_fn)fn)(dst, src, n, (CUstream)s);
}

static inline CUresult gt_cuMemsetD8(void *fn, CUdeviceptr dst, unsigned char v, size_t n) {
	return ((gt_cuMemsetD8_fn)fn)(dst, v, n);
}

static inline CUresult gt_cuMemsetD32(void *fn, CUdeviceptr dst, unsigned int v, size_t n) {
	return ((gt_cuMemsetD32_fn)fn)(dst, v, n);
}

static inline CUresult gt_cuMemsetD8Async(void *fn, CUdeviceptr dst, unsigned char v, size_t n, uintptr_t s) {
	return ((gt_cuMemsetD8Async_fn)fn)(dst, v, n, (CUstream)s);
}

static inline CUresult gt_cuStreamCreate(void *fn, uintptr_t *s, unsigned int flags) {
	CUstream h = NULL;
	CUresult r = ((gt_cuStreamCreate_fn)fn)(&h, flags);
	*s = (uintptr_t)h;
	return r;
}

static inline CUresult gt_cuStreamDestroy(void *fn, uintptr_t s) { return ((gt_cuStreamDestroy_fn)fn)((CUstream)s); }

static inline CUresult gt_cuStreamSynchronize(void *fn, uintptr_t s) {
	return ((gt_cuStreamSynchronize_fn)fn)((CUstream)s);
}

static inline CUresult gt_cuStreamWaitEvent(void *fn, uintptr_t s, uintptr_t e, unsigned int flags) {
	return ((gt_cuStreamWaitEvent_fn)fn)((CUstream)s, (CUevent)e, flags);
}

/* CUDA_SUCCESS when all work queued on s is done, CUDA_ERROR_NOT_READY
 * while some is pending, any other code for a failure of that work. */
static inline CUresult gt_cuStreamQuery(void *fn, uintptr_t s) { return ((gt_cuStreamQuery_fn)fn)((CUstream)s); }

static inline CUresult gt_cuEventCreate(void *fn, uintptr_t *e, unsigned int flags) {
	CUevent h = NULL;
	CUresult r = ((gt_cuEventCreate_fn)fn)(&h, flags);
	*e = (uintptr_t)h;
	return r;
}

static inline CUresult gt_cuEventRecord(void *fn, uintptr_t e, uintptr_t s) {
	return ((gt_cuEventRecord_fn)fn)((CUevent)e, (CUstream)s);
}

static inline CUresult gt_cuEventSynchronize(void *fn, uintptr_t e) {
	return ((gt_cuEventSynchronize_fn)fn)((CUevent)e);
}

static inline CUresult gt_cuEventDestroy(void *fn, uintptr_t e) { return ((gt_cuEventDestroy_fn)fn)((CUevent)e); }

static inline CUresult gt_cuEventElapsedTime(void *fn, float *ms, uintptr_t start, uintptr_t end) {
	return ((gt_cuEventElapsedTime_fn)fn)(ms, (CUevent)start, (CUevent)end);
}

/* gt_cuModuleLoadData loads a CUBIN or NUL-terminated PTX image and, on
 * failure, leaves the driver's JIT error log in errlog (errlen bytes,
 * always NUL-terminated). */
static inline CUresult gt_cuModuleLoadData(void *fn, uintptr_t *m, const void *image, char *errlog, size_t errlen) {
	CUmodule h = NULL;
	CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void *vals[2] = {(void *)errlog, (void *)(uintptr_t)errlen};
	errlog[0] = '\0';
	CUresult r = ((gt_cuModuleLoadDataEx_fn)fn)(&h, image, 2, opts, vals);
	errlog[errlen - 1] = '\0';
	*m = (uintptr_t)h;
	return r;
}

static inline CUresult gt_cuModuleGetFunction(void *fn, uintptr_t *f, uintptr_t m, const char *name) {
	CUfunction h = NULL;
	CUresult r = ((gt_cuModuleGetFunction_fn)fn)(&h, (CUmodule)m, name);
	*f = (uintptr_t)h;
	return r;
}

static inline CUresult gt_cuModuleUnload(void *fn, uintptr_t m) { return ((gt_cuModuleUnload_fn)fn)((CUmodule)m); }

static inline CUresult gt_cuFuncSetAttribute(void *fn, uintptr_t f, CUfunction_attribute a, int v) {
	return ((gt_cuFuncSetAttribute_fn)fn)((CUfunction)f, a, v);
}

/* gt_cuLaunchKernel launches f with nargs arguments whose values are packed
 * in args (each at offs[i], in Go memory that C only reads during this
 * call). cuLaunchKernel wants void** pointing at each value; both the
 * values and the pointer array are built here in C memory, because C must
 * never hold Go pointers in memory of its own. The driver copies the
 * values at launch, so they are freed on return. */
static inline CUresult gt_cuLaunchKernel(void *fn, uintptr_t f, unsigned int gx, unsigned int gy, unsigned int gz,
                                         unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                                         uintptr_t s, const void *args, size_t argsLen, const size_t *offs, int nargs) {
	void *block = NULL;
	void **ptrs = NULL;
	if (nargs > 0) {
		block = malloc(argsLen > 0 ? argsLen : 1);
		ptrs = (void **)malloc(sizeof(void *) * (size_t)nargs);
		if (block == NULL || ptrs == NULL) {
			free(block);
			free(ptrs);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		memcpy(block, args, argsLen);
		for (int i = 0; i < nargs; i++) {
			ptrs[i] = (char *)block + offs[i];
		}
	}
	CUresult r = ((gt_cuLaunchKernel_fn)fn)((CUfunction)f, gx, gy, gz, bx, by, bz, shmem, (CUstream)s, ptrs, NULL);
	free(ptrs);
	free(block);
	return r;
}

#endif /* GT_CUDA_H */
