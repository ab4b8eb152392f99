/*
 * mock_cuda.c: a CPU stand-in for libcuda.so.1, built by tests (see
 * cudatest.BuildMockDriver) and loaded through GOTRAIN_LIBCUDA. It exports
 * the driver API symbols gotrain uses, with the driver's prototypes, and
 * checks their use strictly, so a wrong symbol, argument order, size or
 * thread binding fails a test:
 *
 * - Device memory is host memory from malloc, so a device pointer is a host
 *   pointer and other mocks (cuBLAS, NCCL) can compute on it. Every copy,
 *   memset and kernel argument is checked against the live allocations;
 *   async copies accept only pinned host memory from cuMemAllocHost_v2.
 * - A context is current per OS thread, as in the driver: calls that need
 *   one fail with CUDA_ERROR_INVALID_CONTEXT on a thread where none is.
 * - Streams run their work at once; events take the host clock. An event
 *   waited for by cuStreamWaitEvent before any cuEventRecord of it orders
 *   nothing in the driver, so the mock counts such waits as a bug to find
 *   (MOCK_CNT_WAIT_UNRECORDED), with records, waits and stream polls.
 * - Modules are PTX text, of a PTX ISA major the driver's CUDA release
 *   reads (CUDA_ERROR_UNSUPPORTED_PTX_VERSION otherwise, as for 9.x PTX
 *   from NVRTC 13 on a CUDA 12 driver). cuModuleGetFunction finds
 *   ".entry NAME" in it;
 *   launching runs a CPU version of the few test kernels listed in
 *   `kernels` below, over the launch's real grid and block.
 * - With GOTRAIN_MOCK_CUDA_EMU naming a kernel emulation library (package
 *   kernels/emu builds one from the real kernel sources), every other
 *   kernel of a module that the library has is launched there: the CUDA
 *   execution model on the CPU. An emulated launch that fails (a deadlock,
 *   a bad shuffle) is CUDA_ERROR_LAUNCH_FAILED, with the emulator's message
 *   on stderr.
 * - The unversioned legacy names (cuMemAlloc, ...) exist, as in libcuda,
 *   but fail with CUDA_ERROR_NOT_SUPPORTED, so dlsym'ing them is caught.
 *
 * Build options (cudatest.BuildMockDriver's defines):
 *   -DMOCK_CUDA_DRIVER_VERSION=N  what cuDriverGetVersion reports (default
 *                                 12040). From 12080 on the mock also
 *                                 exports cuEventElapsedTime_v2, and its
 *                                 plain cuEventElapsedTime then fails with
 *                                 CUDA_ERROR_NOT_SUPPORTED, so binding the
 *                                 older name where the newer exists is caught.
 *   -DMOCK_CUDA13_NAMES_ONLY      leave out the names the CUDA 13.0 header
 *                                 no longer declares (cuEventElapsedTime),
 *                                 as a driver that dropped them would.
 *
 * GOTRAIN_MOCK_CUDA_DEVICES sets the device count at cuInit (default 2;
 * 0 makes cuInit fail with CUDA_ERROR_NO_DEVICE). Even ordinals are sm_80
 * devices, odd ones sm_90 (see cudatest.MockDeviceSpec).
 * GOTRAIN_MOCK_CUDA_MEMORY, read at cuInit, caps every device's memory at
 * that many bytes (below the spec's total), so tests can run a device out
 * of memory. GOTRAIN_MOCK_COUNTERS names the file of structure counters
 * (mock_counters.h): synchronisations, blocking copies, allocations and
 * launches are counted there.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mock_counters.h"

#ifndef MOCK_CUDA_DRIVER_VERSION
#define MOCK_CUDA_DRIVER_VERSION 12040
#endif

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

enum {
	OK = 0,
	E_INVALID_VALUE = 1,
	E_OUT_OF_MEMORY = 2,
	E_NOT_INITIALIZED = 3,
	E_NO_DEVICE = 100,
	E_INVALID_DEVICE = 101,
	E_INVALID_IMAGE = 200,
	E_INVALID_CONTEXT = 201,
	E_NO_BINARY_FOR_GPU = 209,
	E_INVALID_PTX = 218,
	E_UNSUPPORTED_PTX_VERSION = 222,
	E_INVALID_HANDLE = 400,
	E_NOT_FOUND = 500,
	E_ILLEGAL_ADDRESS = 700,
	E_LAUNCH_FAILED = 719,
	E_NOT_SUPPORTED = 801,
};

#define MAX_DEVICES 8
#define MAGIC_CTX 0x43545831u
#define MAGIC_STREAM 0x5354524du
#define MAGIC_EVENT 0x45564e54u
#define MAGIC_MODULE 0x4d4f444cu
#define MAGIC_FUNC 0x46554e43u
#define DEFAULT_SHARED (48 * 1024)

/* ---- devices ---------------------------------------------------------- */

typedef struct {
	int major, minor, sms, optin;
	unsigned long long total;
	const char *name;
} dev_spec;

static const dev_spec specs[2] = {
	{8, 0, 108, 166912, 40ull << 30, "gotrain mock GPU (sm_80)"},
	{9, 0, 132, 232448, 80ull << 30, "gotrain mock GPU (sm_90)"},
};

static const dev_spec *spec(int dev) { return &specs[dev % 2]; }

/* memory_cap is GOTRAIN_MOCK_CUDA_MEMORY (0: none), read at cuInit. */
static unsigned long long memory_cap;

/* device_total is dev's memory: its spec's, or the cap if smaller. */
static unsigned long long device_total(int dev) {
	unsigned long long t = spec(dev)->total;
	return memory_cap != 0 && memory_cap < t ? memory_cap : t;
}

typedef struct {
	uint32_t magic;
	int dev;
	int refs;
} mock_ctx;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int initialized;
static int ndev;
static mock_ctx ctxs[MAX_DEVICES];
static __thread mock_ctx *current;

/* ---- allocations ------------------------------------------------------ */

typedef struct alloc {
	char *base;
	size_t n;
	int dev;    /* owning device */
	int pinned; /* host memory from cuMemAllocHost_v2 */
	struct alloc *next;
} alloc;

static alloc *allocs;
static unsigned long long used[MAX_DEVICES];

/* find returns the live allocation holding [p, p+n), or NULL. */
static alloc *find(const void *p, size_t n, int pinned) {
	const char *c = (const char *)p;
	for (alloc *a = allocs; a; a = a->next) {
		if (a->pinned == pinned && c >= a->base && c + n <= a->base + a->n && c + n >= c) {
			return a;
		}
	}
	return NULL;
}

static int valid_dev_range(CUdeviceptr p, size_t n) {
	pthread_mutex_lock(&mu);
	int ok = find((const void *)(uintptr_t)p, n, 0) != NULL;
	pthread_mutex_unlock(&mu);
	return ok;
}

static int valid_pinned_range(const void *p, size_t n) {
	pthread_mutex_lock(&mu);
	int ok = find(p, n, 1) != NULL;
	pthread_mutex_unlock(&mu);
	return ok;
}

static void free_device_allocs(int dev) {
	alloc **pp = &allocs;
	while (*pp) {
		alloc *a = *pp;
		if (a->dev == dev) {
			*pp = a->next;
			free(a->base);
			free(a);
		} else {
			pp = &a->next;
		}
	}
	used[dev] = 0;
}

/* need_ctx is the driver's rule: a call that uses a context needs one
 * current on the calling thread. */
static CUresult need_ctx(void) {
	if (!initialized) {
		return E_NOT_INITIALIZED;
	}
	if (current == NULL || current->magic != MAGIC_CTX || current->refs <= 0) {
		return E_INVALID_CONTEXT;
	}
	return OK;
}

/* ---- init, version, errors --------------------------------------------- */

CUresult cuInit(unsigned int flags) {
	if (flags != 0) {
		return E_INVALID_VALUE;
	}
	const char *s = getenv("GOTRAIN_MOCK_CUDA_DEVICES");
	int n = s ? atoi(s) : 2;
	const char *cap = getenv("GOTRAIN_MOCK_CUDA_MEMORY");
	memory_cap = cap ? strtoull(cap, NULL, 10) : 0;
	if (n <= 0) {
		return E_NO_DEVICE;
	}
	if (n > MAX_DEVICES) {
		n = MAX_DEVICES;
	}
	pthread_mutex_lock(&mu);
	if (!initialized) {
		ndev = n;
		for (int i = 0; i < MAX_DEVICES; i++) {
			ctxs[i].magic = MAGIC_CTX;
			ctxs[i].dev = i;
			ctxs[i].refs = 0;
		}
		initialized = 1;
	}
	pthread_mutex_unlock(&mu);
	return OK;
}

CUresult cuDriverGetVersion(int *v) {
	if (v == NULL) {
		return E_INVALID_VALUE;
	}
	*v = MOCK_CUDA_DRIVER_VERSION;
	return OK;
}

static const struct {
	CUresult code;
	const char *name, *msg;
} errtab[] = {
	{OK, "CUDA_SUCCESS", "no error"},
	{E_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	{E_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	{E_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
	{E_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	{E_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	{E_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
	{E_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
	{E_NO_BINARY_FOR_GPU, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
	{E_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
	{E_UNSUPPORTED_PTX_VERSION, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
	 "the provided PTX was compiled with an unsupported toolchain."},
	{E_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	{E_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
	{E_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
	{E_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
	{E_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
};

CUresult cuGetErrorName(CUresult r, const char **s) {
	for (size_t i = 0; i < sizeof(errtab) / sizeof(errtab[0]); i++) {
		if (errtab[i].code == r) {
			*s = errtab[i].name;
			return OK;
		}
	}
	*s = NULL;
	return E_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult r, const char **s) {
	for (size_t i = 0; i < sizeof(errtab) / sizeof(errtab[0]); i++) {
		if (errtab[i].code == r) {
			*s = errtab[i].msg;
			return OK;
		}
	}
	*s = NULL;
	return E_INVALID_VALUE;
}

/* ---- devices ------------------------------------------------------------ */

static CUresult check_dev(CUdevice d) {
	if (!initialized) {
		return E_NOT_INITIALIZED;
	}
	return d >= 0 && d < ndev ? OK : E_INVALID_DEVICE;
}

CUresult cuDeviceGetCount(int *n) {
	if (!initialized) {
		return E_NOT_INITIALIZED;
	}
	*n = ndev;
	return OK;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal) {
	CUresult r = check_dev(ordinal);
	if (r == OK) {
		*d = ordinal;
	}
	return r;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
	CUresult r = check_dev(d);
	if (r != OK) {
		return r;
	}
	if (name == NULL || len <= 0) {
		return E_INVALID_VALUE;
	}
	snprintf(name, (size_t)len, "%s", spec(d)->name);
	return OK;
}

CUresult cuDeviceGetPCIBusId(char *busid, int len, CUdevice d) {
	CUresult r = check_dev(d);
	if (r != OK) {
		return r;
	}
	if (busid == NULL || len < 13) {
		return E_INVALID_VALUE;
	}
	snprintf(busid, (size_t)len, "0000:%02x:00.0", 0x10 + d);
	return OK;
}

CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
	CUresult r = check_dev(d);
	if (r != OK) {
		return r;
	}
	switch (attr) {
	case 1: /* MAX_THREADS_PER_BLOCK */
		*v = 1024;
		return OK;
	case 8: /* MAX_SHARED_MEMORY_PER_BLOCK */
		*v = DEFAULT_SHARED;
		return OK;
	case 10: /* WARP_SIZE */
		*v = 32;
		return OK;
	case 16: /* MULTIPROCESSOR_COUNT */
		*v = spec(d)->sms;
		return OK;
	case 75: /* COMPUTE_CAPABILITY_MAJOR */
		*v = spec(d)->major;
		return OK;
	case 76: /* COMPUTE_CAPABILITY_MINOR */
		*v = spec(d)->minor;
		return OK;
	case 97: /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
		*v = spec(d)->optin;
		return OK;
	}
	return E_INVALID_VALUE;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
	CUresult r = check_dev(d);
	if (r == OK) {
		*bytes = (size_t)device_total(d);
	}
	return r;
}

/* ---- contexts ----------------------------------------------------------- */

CUresult cuDevicePrimaryCtxRetain(void **pctx, CUdevice d) {
	CUresult r = check_dev(d);
	if (r != OK) {
		return r;
	}
	pthread_mutex_lock(&mu);
	ctxs[d].refs++;
	pthread_mutex_unlock(&mu);
	*pctx = &ctxs[d];
	return OK;
}

/* Releasing the last reference destroys the context's resources, as the
 * driver does. */
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
	CUresult r = check_dev(d);
	if (r != OK) {
		return r;
	}
	pthread_mutex_lock(&mu);
	if (ctxs[d].refs <= 0) {
		pthread_mutex_unlock(&mu);
		return E_INVALID_CONTEXT;
	}
	if (--ctxs[d].refs == 0) {
		free_device_allocs(d);
	}
	pthread_mutex_unlock(&mu);
	return OK;
}

CUresult cuCtxSetCurrent(void *ctx) {
	if (!initialized) {
		return E_NOT_INITIALIZED;
	}
	mock_ctx *c = (mock_ctx *)ctx;
	if (c != NULL && (c < ctxs || c >= ctxs + ndev || c->refs <= 0)) {
		return E_INVALID_CONTEXT;
	}
	current = c;
	return OK;
}

CUresult cuCtxGetCurrent(void **pctx) {
	if (!initialized) {
		return E_NOT_INITIALIZED;
	}
	*pctx = current;
	return OK;
}

CUresult cuCtxSynchronize(void) {
	CUresult r = need_ctx();
	if (r == OK) {
		mock_count(MOCK_CNT_CTX_SYNC, 1);
	}
	return r;
}

/* ---- memory -------------------------------------------------------------- */

CUresult cuMemGetInfo_v2(size_t *free_, size_t *total) {
	CUresult r = need_ctx();
	if (r != OK) {
		return r;
	}
	pthread_mutex_lock(&mu);
	*total = (size_t)device_total(current->dev);
	*free_ = (size_t)(device_total(current->dev) - used[current->dev]);
	pthread_mutex_unlock(&mu);
	return OK;
}

static CUresult do_alloc(void **out, size_t n, int pinned) {
	CUresult r = need_ctx();
	if (r != OK) {
		return r;
	}
	if (out == NULL || n == 0) {
		return E_INVALID_VALUE;
	}
	int dev = current->dev;
	pthread_mutex_lock(&mu);
	if (!pinned && used[dev] + n > device_total(dev)) {
		pthread_mutex_unlock(&mu);
		return E_OUT_OF_MEMORY;
	}
	alloc *a = calloc(1, sizeof(alloc));
	/* 256-byte alignment, as cuMemAlloc guarantees. */
	void *p = NULL;
	if (a == NULL || posix_memalign(&p, 256, n) != 0) {
		free(a);
		pthread_mutex_unlock(&mu);
		return E_OUT_OF_MEMORY;
	}
	a->base = p;
	a->n = n;
	a->dev = dev;
	a->pinned = pinned;
	a->next = allocs;
	allocs = a;
	if (!pinned) {
		used[dev] += n;
	}
	pthread_mutex_unlock(&mu);
	*out = p;
	return OK;
}

static CUresult do_free(void *p, int pinned) {
	if (!initialized) {
		return E_NOT_INITIALIZED;
	}
	pthread_mutex_lock(&mu);
	for (alloc **pp = &allocs; *pp; pp = &(*pp)->next) {
		alloc *a = *pp;
		if (a->base == p && a->pinned == pinned) {
			*pp = a->next;
			if (!pinned) {
				used[a->dev] -= a->n;
			}
			free(a->base);
			free(a);
			pthread_mutex_unlock(&mu);
			return OK;
		}
	}
	pthread_mutex_unlock(&mu);
	return E_INVALID_VALUE;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t n) {
	void *p = NULL;
	CUresult r = do_alloc(&p, n, 0);
	if (r == OK) {
		*dptr = (CUdeviceptr)(uintptr_t)p;
		mock_count(MOCK_CNT_ALLOC, 1);
	}
	return r;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
	CUresult r = need_ctx();
	if (r == OK) {
		r = do_free((void *)(uintptr_t)p, 0);
	}
	if (r == OK) {
		mock_count(MOCK_CNT_FREE, 1);
	}
	return r;
}

CUresult cuMemAllocHost_v2(void **pp, size_t n) {
	CUresult r = do_alloc(pp, n, 1);
	if (r == OK) {
		mock_count(MOCK_CNT_ALLOC_HOST, 1);
	}
	return r;
}

CUresult cuMemFreeHost(void *p) {
	CUresult r = need_ctx();
	if (r == OK) {
		r = do_free(p, 1);
	}
	if (r == OK) {
		mock_count(MOCK_CNT_FREE_HOST, 1);
	}
	return r;
}

/* ---- streams and events ---------------------------------------------------- */

typedef struct {
	uint32_t magic;
	mock_ctx *ctx;
} mock_stream;

typedef struct {
	uint32_t magic;
	mock_ctx *ctx;
	unsigned flags;
	int recorded;
	struct timespec at;
} mock_event;

/* check_stream accepts the default stream (NULL) or a live stream of the
 * current context. */
static CUresult check_stream(void *s) {
	CUresult r = need_ctx();
	if (r != OK) {
		return r;
	}
	mock_stream *st = (mock_stream *)s;
	if (st != NULL && (st->magic != MAGIC_STREAM || st->ctx != current)) {
		return E_INVALID_HANDLE;
	}
	return OK;
}

static CUresult check_event(void *e) {
	CUresult r = need_ctx();
	if (r != OK) {
		return r;
	}
	mock_event *ev = (mock_event *)e;
	if (ev == NULL || ev->magic != MAGIC_EVENT) {
		return E_INVALID_HANDLE;
	}
	return OK;
}

CUresult cuStreamCreate(void **ps, unsigned int flags) {
	CUresult r = need_ctx();
	if (r != OK) {
		return r;
	}
	if (flags > 1) {
		return E_INVALID_VALUE;
	}
	mock_stream *s = calloc(1, sizeof(mock_stream));
	s->magic = MAGIC_STREAM;
	s->ctx = current;
	*ps = s;
	return OK;
}

CUresult cuStreamDestroy_v2(void *s) {
	if (s == NULL) {
		return E_INVALID_HANDLE;
	}
	CUresult r = check_stream(s);
	if (r != OK) {
		return r;
	}
	((mock_stream *)s)->magic = 0;
	free(s);
	return OK;
}

CUresult cuStreamSynchronize(void *s) {
	CUresult r = check_stream(s);
	if (r == OK) {
		mock_count(MOCK_CNT_STREAM_SYNC, 1);
	}
	return r;
}

CUresult cuStreamWaitEvent(void *s, void *e, unsigned int flags) {
	CUresult r = check_stream(s);
	if (r != OK) {
		return r;
	}
	if (flags != 0) {
		return E_INVALID_VALUE;
	}
	r = check_event(e);
	if (r == OK) {
		mock_count(MOCK_CNT_STREAM_WAIT, 1);
		if (!((mock_event *)e)->recorded) {
			mock_count(MOCK_CNT_WAIT_UNRECORDED, 1);
		}
	}
	return r;
}

CUresult cuEventCreate(void **pe, unsigned int flags) {
	CUresult r = need_ctx();
	if (r != OK) {
		return r;
	}
	if (flags & ~7u) {
		return E_INVALID_VALUE;
	}
	mock_event *e = calloc(1, sizeof(mock_event));
	e->magic = MAGIC_EVENT;
	e->ctx = current;
	e->flags = flags;
	*pe = e;
	return OK;
}

CUresult cuEventRecord(void *e, void *s) {
	CUresult r = check_event(e);
	if (r == OK) {
		r = check_stream(s);
	}
	if (r != OK) {
		return r;
	}
	mock_event *ev = (mock_event *)e;
	clock_gettime(CLOCK_MONOTONIC, &ev->at);
	ev->recorded = 1;
	mock_count(MOCK_CNT_EVENT_RECORD, 1);
	return OK;
}

CUresult cuEventSynchronize(void *e) {
	CUresult r = check_event(e);
	if (r == OK) {
		mock_count(MOCK_CNT_EVENT_SYNC, 1);
	}
	return r;
}

CUresult cuEventDestroy_v2(void *e) {
	CUresult r = check_event(e);
	if (r != OK) {
		return r;
	}
	((mock_event *)e)->magic = 0;
	free(e);
	return OK;
}

/* The time between two recorded timing events, behind whichever names
 * this build exports. */
__attribute__((unused)) static CUresult elapsed_time(float *ms, void *start, void *end) {
	CUresult r = check_event(start);
	if (r == OK) {
		r = check_event(end);
	}
	if (r != OK) {
		return r;
	}
	mock_event *a = (mock_event *)start, *b = (mock_event *)end;
	if (!a->recorded || !b->recorded || (a->flags & 2) || (b->flags & 2)) {
		return E_INVALID_HANDLE;
	}
	double d = (double)(b->at.tv_sec - a->at.tv_sec) * 1e3 + (double)(b->at.tv_nsec - a->at.tv_nsec) / 1e6;
	*ms = (float)d;
	return OK;
}

#if MOCK_CUDA_DRIVER_VERSION >= 12080
CUresult cuEventElapsedTime_v2(float *ms, void *start, void *end) { return elapsed_time(ms, start, end); }
#endif

#ifndef MOCK_CUDA13_NAMES_ONLY
CUresult cuEventElapsedTime(float *ms, void *start, void *end) {
#if MOCK_CUDA_DRIVER_VERSION >= 12080
	(void)ms, (void)start, (void)end;
	return E_NOT_SUPPORTED;
#else
	return elapsed_time(ms, start, end);
#endif
}
#endif

/* ---- copies and memset ---------------------------------------------------- */

static CUresult copy_htod(CUdeviceptr dst, const void *src, size_t n) {
	CUresult r = need_ctx();
	if (r != OK) {
		return r;
	}
	if (src == NULL || !valid_dev_range(dst, n)) {
		return E_INVALID_VALUE;
	}
	memcpy((void *)(uintptr_t)dst, src, n);
	return OK;
}

static CUresult copy_dtoh(void *dst, CUdeviceptr src, size_t n) {
	CUresult r = need_ctx();
	if (r != OK) {
		return r;
	}
	if (dst == NULL || !valid_dev_range(src, n)) {
		return E_INVALID_VALUE;
	}
	memcpy(dst, (const void *)(uintptr_t)src, n);
	return OK;
}

/* The synchronous copies block the host until the device is done. */
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
	CUresult r = copy_htod(dst, src, n);
	if (r == OK) {
		mock_count(MOCK_CNT_HTOD, 1);
	}
	return r;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
	CUresult r = copy_dtoh(dst, src, n);
	if (r == OK) {
		mock_count(MOCK_CNT_DTOH, 1);
	}
	return r;
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
	CUresult r = need_ctx();
	if (r != OK) {
		return r;
	}
	if (!valid_dev_range(dst, n) || !valid_dev_range(src, n)) {
		return E_INVALID_VALUE;
	}
	memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
	return OK;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, void *s) {
	CUresult r = check_stream(s);
	if (r != OK) {
		return r;
	}
	if (!valid_pinned_range(src, n)) {
		return E_INVALID_VALUE;
	}
	r = copy_htod(dst, src, n);
	if (r == OK) {
		mock_count(MOCK_CNT_ASYNC_COPY, 1);
	}
	return r;
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, void *s) {
	CUresult r = check_stream(s);
	if (r != OK) {
		return r;
	}
	if (!valid_pinned_range(dst, n)) {
		return E_INVALID_VALUE;
	}
	r = copy_dtoh(dst, src, n);
	if (r == OK) {
		mock_count(MOCK_CNT_ASYNC_COPY, 1);
	}
	return r;
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, void *s) {
	CUresult r = check_stream(s);
	if (r == OK) {
		r = cuMemcpyDtoD_v2(dst, src, n);
	}
	if (r == OK) {
		mock_count(MOCK_CNT_ASYNC_COPY, 1);
	}
	return r;
}

CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) {
	CUresult r = need_ctx();
	if (r != OK) {
		return r;
	}
	if (!valid_dev_range(dst, n)) {
		return E_INVALID_VALUE;
	}
	memset((void *)(uintptr_t)dst, v, n);
	mock_count(MOCK_CNT_MEMSET, 1);
	return OK;
}

CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int v, size_t n) {
	CUresult r = need_ctx();
	if (r != OK) {
		return r;
	}
	if (dst % 4 != 0 || n > SIZE_MAX / 4 || !valid_dev_range(dst, n * 4)) {
		return E_INVALID_VALUE;
	}
	unsigned int *p = (unsigned int *)(uintptr_t)dst;
	for (size_t i = 0; i < n; i++) {
		p[i] = v;
	}
	mock_count(MOCK_CNT_MEMSET, 1);
	return OK;
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, void *s) {
	CUresult r = check_stream(s);
	return r != OK ? r : cuMemsetD8_v2(dst, v, n);
}

/* ---- modules and kernels ---------------------------------------------------- */

typedef struct {
	unsigned gx, gy, gz, bx, by, bz;
} geom;

/* kernel_fn runs a kernel over the whole launch; it returns
 * E_ILLEGAL_ADDRESS if an argument pointer does not cover what the kernel
 * touches. */
typedef CUresult (*kernel_fn)(const geom *g, void **params);

/* Linear thread index over x, as blockIdx.x*blockDim.x+threadIdx.x. */
static unsigned long long threads_x(const geom *g) { return (unsigned long long)g->gx * g->bx; }

/* gt_test_vadd(float *c, const float *a, const float *b, unsigned n):
 * c[i] = a[i] + b[i] for every thread i < n. */
static CUresult k_vadd(const geom *g, void **params) {
	float *c = *(float **)params[0];
	const float *a = *(const float **)params[1];
	const float *b = *(const float **)params[2];
	unsigned n = *(unsigned *)params[3];
	unsigned long long t = threads_x(g), m = t < n ? t : n;
	if (m > 0 && (!valid_dev_range((uintptr_t)c, m * 4) || !valid_dev_range((uintptr_t)a, m * 4) ||
	              !valid_dev_range((uintptr_t)b, m * 4))) {
		return E_ILLEGAL_ADDRESS;
	}
	for (unsigned long long i = 0; i < m; i++) {
		c[i] = a[i] + b[i];
	}
	return OK;
}

/* gt_test_axpby(float *y, const float *x, float a, double b, long long n):
 * y[i] = a*x[i] + b*y[i] (in double, stored as float) for i < n. */
static CUresult k_axpby(const geom *g, void **params) {
	float *y = *(float **)params[0];
	const float *x = *(const float **)params[1];
	float a = *(float *)params[2];
	double b = *(double *)params[3];
	long long n = *(long long *)params[4];
	unsigned long long t = threads_x(g), m = n < 0 ? 0 : (t < (unsigned long long)n ? t : (unsigned long long)n);
	if (m > 0 && (!valid_dev_range((uintptr_t)y, m * 4) || !valid_dev_range((uintptr_t)x, m * 4))) {
		return E_ILLEGAL_ADDRESS;
	}
	for (unsigned long long i = 0; i < m; i++) {
		y[i] = (float)((double)a * (double)x[i] + b * (double)y[i]);
	}
	return OK;
}

/* gt_test_fill2d(int *out, int width, int height, int pitch): with
 * x = blockIdx.x*blockDim.x+threadIdx.x and y likewise, every thread with
 * x < width and y < height writes out[y*pitch+x] = 1000*y + x. */
static CUresult k_fill2d(const geom *g, void **params) {
	int *out = *(int **)params[0];
	int w = *(int *)params[1], h = *(int *)params[2], pitch = *(int *)params[3];
	long long tx = (long long)g->gx * g->bx, ty = (long long)g->gy * g->by;
	long long mx = tx < w ? tx : w, my = ty < h ? ty : h;
	if (mx > 0 && my > 0 && !valid_dev_range((uintptr_t)out, (size_t)((my - 1) * pitch + mx) * 4)) {
		return E_ILLEGAL_ADDRESS;
	}
	for (long long y = 0; y < my; y++) {
		for (long long x = 0; x < mx; x++) {
			out[y * pitch + x] = (int)(1000 * y + x);
		}
	}
	return OK;
}

static const struct {
	const char *name;
	kernel_fn fn;
} kernels[] = {
	{"gt_test_vadd", k_vadd},
	{"gt_test_axpby", k_axpby},
	{"gt_test_fill2d", k_fill2d},
};

typedef struct mock_func {
	uint32_t magic;
	struct mock_module *mod;
	kernel_fn fn; /* NULL: in the module but not runnable by the mock */
	int emu_id;   /* >= 0: the kernel's index in the emulation library */
	int max_dynamic_shared;
	char name[128];
	struct mock_func *next;
} mock_func;

typedef struct mock_module {
	uint32_t magic;
	mock_ctx *ctx;
	char *ptx;
	mock_func *funcs;
} mock_module;

static void jit_log(unsigned n, int *opts, void **vals, const char *msg) {
	char *buf = NULL;
	size_t len = 0;
	int len_at = -1;
	for (unsigned i = 0; i < n; i++) {
		if (opts[i] == 5) {
			buf = (char *)vals[i];
		} else if (opts[i] == 6) {
			len = (size_t)(uintptr_t)vals[i];
			len_at = (int)i;
		}
	}
	if (buf != NULL && len > 0) {
		snprintf(buf, len, "%s", msg);
		if (len_at >= 0) {
			vals[len_at] = (void *)(uintptr_t)(strlen(buf) + 1);
		}
	}
}

CUresult cuModuleLoadDataEx(void **pm, const void *image, unsigned int n, int *opts, void **vals) {
	CUresult r = need_ctx();
	if (r != OK) {
		return r;
	}
	if (image == NULL || (n > 0 && (opts == NULL || vals == NULL))) {
		return E_INVALID_VALUE;
	}
	const char *text = (const char *)image;
	if (strncmp(text, "\x7f" "ELF", 4) == 0) {
		jit_log(n, opts, vals, "mock driver: CUBIN images cannot run on the CPU; load PTX");
		return E_INVALID_IMAGE;
	}
	if (strstr(text, ".version") == NULL || strstr(text, ".target") == NULL) {
		jit_log(n, opts, vals, "ptxas application ptx input, line 1; fatal   : missing .version/.target directive");
		return E_INVALID_PTX;
	}
	/* The PTX ISA major of CUDA N is N-4 (8.x for 12, 9.x for 13); a driver
	 * JITs no PTX of a later major. Within a major the mock is lenient. */
	const char *v = strstr(text, ".version ");
	if (v != NULL && atoi(v + strlen(".version ")) > MOCK_CUDA_DRIVER_VERSION / 1000 - 4) {
		char msg[160];
		snprintf(msg, sizeof msg, "ptxas application ptx input, line 1; fatal   : Unsupported .version %.4s; current version is '%d.x'",
		         v + strlen(".version "), MOCK_CUDA_DRIVER_VERSION / 1000 - 4);
		jit_log(n, opts, vals, msg);
		return E_UNSUPPORTED_PTX_VERSION;
	}
	const char *t = strstr(text, ".target sm_");
	if (t != NULL) {
		int sm = atoi(t + strlen(".target sm_"));
		int dev_sm = spec(current->dev)->major * 10 + spec(current->dev)->minor;
		if (sm > dev_sm) {
			char msg[160];
			snprintf(msg, sizeof msg, "ptxas fatal   : PTX targets sm_%d, device is sm_%d", sm, dev_sm);
			jit_log(n, opts, vals, msg);
			return E_NO_BINARY_FOR_GPU;
		}
	}
	mock_module *m = calloc(1, sizeof(mock_module));
	m->magic = MAGIC_MODULE;
	m->ctx = current;
	m->ptx = strdup(text);
	*pm = m;
	jit_log(n, opts, vals, "");
	return OK;
}

/* has_entry finds ".entry NAME" followed by '(' or white space. */
static int has_entry(const char *ptx, const char *name) {
	size_t nl = strlen(name);
	for (const char *p = strstr(ptx, ".entry"); p; p = strstr(p + 1, ".entry")) {
		const char *q = p + strlen(".entry");
		while (*q == ' ' || *q == '\t') {
			q++;
		}
		if (strncmp(q, name, nl) == 0 && (q[nl] == '(' || q[nl] == ' ' || q[nl] == '\t' || q[nl] == '\n' ||
		                                  q[nl] == '\r')) {
			return 1;
		}
	}
	return 0;
}

/* The kernel emulation library named by GOTRAIN_MOCK_CUDA_EMU, opened once. */
typedef int (*emu_find_fn)(const char *);
typedef int (*emu_launch_fn)(int, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void **, char *, int);
static pthread_once_t emu_once = PTHREAD_ONCE_INIT;
static emu_find_fn emu_find;
static emu_launch_fn emu_launch;

static void emu_open(void) {
	const char *path = getenv("GOTRAIN_MOCK_CUDA_EMU");
	if (path == NULL || *path == 0) {
		return;
	}
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		fprintf(stderr, "mock driver: GOTRAIN_MOCK_CUDA_EMU: %s\n", dlerror());
		return;
	}
	emu_find = (emu_find_fn)dlsym(h, "gt_emu_find");
	emu_launch = (emu_launch_fn)dlsym(h, "gt_emu_launch");
	if (emu_find == NULL || emu_launch == NULL) {
		fprintf(stderr, "mock driver: %s is not a kernel emulation library\n", path);
		emu_find = NULL;
		emu_launch = NULL;
	}
}

CUresult cuModuleGetFunction(void **pf, void *mod, const char *name) {
	CUresult r = need_ctx();
	if (r != OK) {
		return r;
	}
	mock_module *m = (mock_module *)mod;
	if (m == NULL || m->magic != MAGIC_MODULE || m->ctx != current) {
		return E_INVALID_HANDLE;
	}
	if (name == NULL || strlen(name) >= sizeof(((mock_func *)0)->name)) {
		return E_INVALID_VALUE;
	}
	if (!has_entry(m->ptx, name)) {
		return E_NOT_FOUND;
	}
	mock_func *f = calloc(1, sizeof(mock_func));
	f->magic = MAGIC_FUNC;
	f->mod = m;
	snprintf(f->name, sizeof f->name, "%s", name);
	f->emu_id = -1;
	for (size_t i = 0; i < sizeof(kernels) / sizeof(kernels[0]); i++) {
		if (strcmp(kernels[i].name, name) == 0) {
			f->fn = kernels[i].fn;
		}
	}
	if (f->fn == NULL) {
		pthread_once(&emu_once, emu_open);
		if (emu_find != NULL) {
			f->emu_id = emu_find(name);
		}
	}
	f->next = m->funcs;
	m->funcs = f;
	*pf = f;
	return OK;
}

CUresult cuModuleUnload(void *mod) {
	CUresult r = need_ctx();
	if (r != OK) {
		return r;
	}
	mock_module *m = (mock_module *)mod;
	if (m == NULL || m->magic != MAGIC_MODULE) {
		return E_INVALID_HANDLE;
	}
	for (mock_func *f = m->funcs; f;) {
		mock_func *next = f->next;
		f->magic = 0;
		free(f);
		f = next;
	}
	m->magic = 0;
	free(m->ptx);
	free(m);
	return OK;
}

static CUresult check_func(mock_func *f) {
	CUresult r = need_ctx();
	if (r != OK) {
		return r;
	}
	if (f == NULL || f->magic != MAGIC_FUNC || f->mod->magic != MAGIC_MODULE || f->mod->ctx != current) {
		return E_INVALID_HANDLE;
	}
	return OK;
}

CUresult cuFuncSetAttribute(void *fn, int attr, int value) {
	mock_func *f = (mock_func *)fn;
	CUresult r = check_func(f);
	if (r != OK) {
		return r;
	}
	if (attr != 8 || value < 0 || value > spec(current->dev)->optin) {
		return E_INVALID_VALUE;
	}
	f->max_dynamic_shared = value;
	return OK;
}

CUresult cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shmem, void *s, void **params, void **extra) {
	mock_func *f = (mock_func *)fn;
	CUresult r = check_func(f);
	if (r == OK) {
		r = check_stream(s);
	}
	if (r != OK) {
		return r;
	}
	if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 || bx > 1024 || by > 1024 || bz > 64 ||
	    (unsigned long long)bx * by * bz > 1024 || gy > 65535 || gz > 65535 || extra != NULL) {
		return E_INVALID_VALUE;
	}
	unsigned limit = f->max_dynamic_shared > DEFAULT_SHARED ? (unsigned)f->max_dynamic_shared : DEFAULT_SHARED;
	if (shmem > limit) {
		return E_INVALID_VALUE;
	}
	if (f->fn == NULL && f->emu_id < 0) {
		return E_NOT_SUPPORTED;
	}
	if (params == NULL) {
		return E_INVALID_VALUE;
	}
	mock_count(MOCK_CNT_LAUNCH, 1);
	if (f->fn == NULL) {
		char msg[1024];
		if (emu_launch(f->emu_id, gx, gy, gz, bx, by, bz, params, msg, (int)sizeof msg) != 0) {
			fprintf(stderr, "mock driver: %s\n", msg);
			return E_LAUNCH_FAILED;
		}
		return OK;
	}
	geom g = {gx, gy, gz, bx, by, bz};
	return f->fn(&g, params);
}

/* ---- legacy unversioned names: present in libcuda with 32-bit types ---- */

CUresult cuMemAlloc(unsigned int *p, unsigned int n) {
	(void)p, (void)n;
	return E_NOT_SUPPORTED;
}
CUresult cuMemFree(unsigned int p) {
	(void)p;
	return E_NOT_SUPPORTED;
}
CUresult cuMemGetInfo(unsigned int *f, unsigned int *t) {
	(void)f, (void)t;
	return E_NOT_SUPPORTED;
}
CUresult cuMemcpyHtoD(unsigned int d, const void *s, unsigned int n) {
	(void)d, (void)s, (void)n;
	return E_NOT_SUPPORTED;
}
CUresult cuMemcpyDtoH(void *d, unsigned int s, unsigned int n) {
	(void)d, (void)s, (void)n;
	return E_NOT_SUPPORTED;
}
CUresult cuDeviceTotalMem(unsigned int *b, CUdevice d) {
	(void)b, (void)d;
	return E_NOT_SUPPORTED;
}
CUresult cuDevicePrimaryCtxRelease(CUdevice d) {
	(void)d;
	return E_NOT_SUPPORTED;
}
CUresult cuMemAllocHost(void **p, unsigned int n) {
	(void)p, (void)n;
	return E_NOT_SUPPORTED;
}
CUresult cuStreamDestroy(void *s) {
	(void)s;
	return E_NOT_SUPPORTED;
}
CUresult cuEventDestroy(void *e) {
	(void)e;
	return E_NOT_SUPPORTED;
}
CUresult cuMemsetD8(unsigned int d, unsigned char v, unsigned int n) {
	(void)d, (void)v, (void)n;
	return E_NOT_SUPPORTED;
}
CUresult cuMemsetD32(unsigned int d, unsigned int v, unsigned int n) {
	(void)d, (void)v, (void)n;
	return E_NOT_SUPPORTED;
}

/* ---- stream queries ---------------------------------------------------- */

/* Streams run their work at once, so a live stream has never anything
 * pending: CUDA_SUCCESS, never CUDA_ERROR_NOT_READY. */
CUresult cuStreamQuery(void *s) {
	CUresult r = check_stream(s);
	if (r == OK) {
		mock_count(MOCK_CNT_STREAM_QUERY, 1);
	}
	return r;
}
