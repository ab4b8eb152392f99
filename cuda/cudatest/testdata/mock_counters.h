/*
 * mock_counters.h: the structure counters every mock library keeps, so that
 * tests can assert what a GPU step does (host synchronisations, GEMMs by
 * input and compute type, allocations, kernel launches) and not only what
 * it computes.
 *
 * The counters live in a file named by GOTRAIN_MOCK_COUNTERS, which the
 * test creates (cudatest.NewCounters) with MOCK_CNT_SLOTS zeroed 64-bit
 * slots: each mock maps it shared and adds to its slots atomically, and
 * the test reads the file. A file is simpler than an exported C function
 * (Go tests of these packages may not use cgo) and works across the driver,
 * cuBLAS and cuBLASLt mocks and across processes (gotrain started by a
 * test) alike. Without the variable nothing is counted.
 *
 * The slot numbers are an interface: cudatest/counters.go reads the same
 * ones.
 */
#ifndef MOCK_COUNTERS_H
#define MOCK_COUNTERS_H

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
	MOCK_CNT_MAGIC = 0,         /* written by the test: "gtcnt001" */
	MOCK_CNT_STREAM_SYNC = 1,   /* cuStreamSynchronize */
	MOCK_CNT_CTX_SYNC = 2,      /* cuCtxSynchronize */
	MOCK_CNT_EVENT_SYNC = 3,    /* cuEventSynchronize */
	MOCK_CNT_DTOH = 4,          /* cuMemcpyDtoH_v2: blocks the host until the device is done */
	MOCK_CNT_HTOD = 5,          /* cuMemcpyHtoD_v2 */
	MOCK_CNT_ALLOC = 6,         /* cuMemAlloc_v2 */
	MOCK_CNT_ALLOC_HOST = 7,    /* cuMemAllocHost_v2 */
	MOCK_CNT_FREE = 8,          /* cuMemFree_v2 */
	MOCK_CNT_FREE_HOST = 9,     /* cuMemFreeHost */
	MOCK_CNT_LAUNCH = 10,       /* cuLaunchKernel */
	MOCK_CNT_ASYNC_COPY = 11,   /* cuMemcpy*Async_v2 */
	MOCK_CNT_MEMSET = 12,       /* cuMemset* */
	MOCK_CNT_STREAM_QUERY = 13, /* cuStreamQuery: a poll of a stream */
	MOCK_CNT_EVENT_RECORD = 14, /* cuEventRecord */
	MOCK_CNT_STREAM_WAIT = 15,  /* cuStreamWaitEvent */
	MOCK_CNT_WAIT_UNRECORDED = 16, /* cuStreamWaitEvent on an event never recorded: orders nothing */
	MOCK_CNT_GEMM = 32,         /* GEMM calls: MOCK_CNT_GEMM + input*MOCK_CNT_COMPUTES + compute */
	MOCK_CNT_GEMM_PRODUCTS = 64, /* the same table counting products (a batch of n counts n) */
	MOCK_CNT_SLOTS = 96,
};

/* GEMM input types (the A and B operands) and compute types, as indices. */
enum { MOCK_IN_32F = 0, MOCK_IN_16BF = 1, MOCK_IN_OTHER = 2, MOCK_CNT_INPUTS = 3 };
enum {
	MOCK_CT_32F = 0,          /* CUBLAS_COMPUTE_32F (68) */
	MOCK_CT_32F_PEDANTIC = 1, /* 69 */
	MOCK_CT_32F_FAST_16F = 2, /* 74 */
	MOCK_CT_32F_FAST_16BF = 3, /* 75 */
	MOCK_CT_32F_FAST_TF32 = 4, /* 77 */
	MOCK_CT_OTHER = 5,
	MOCK_CNT_COMPUTES = 6,
};

static pthread_mutex_t mock_cnt_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *mock_cnt_map;

/* mock_cnt_slots maps the counter file on first use after the variable is
 * set; a missing or short file counts nothing. */
static inline uint64_t *mock_cnt_slots(void) {
	uint64_t *m = __atomic_load_n(&mock_cnt_map, __ATOMIC_ACQUIRE);
	if (m != NULL) {
		return m;
	}
	const char *path = getenv("GOTRAIN_MOCK_COUNTERS");
	if (path == NULL || *path == 0) {
		return NULL;
	}
	pthread_mutex_lock(&mock_cnt_mu);
	if (mock_cnt_map == NULL) {
		int fd = open(path, O_RDWR | O_CLOEXEC);
		struct stat st;
		if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size >= (off_t)(MOCK_CNT_SLOTS * sizeof(uint64_t))) {
			void *p = mmap(NULL, MOCK_CNT_SLOTS * sizeof(uint64_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			if (p != MAP_FAILED) {
				__atomic_store_n(&mock_cnt_map, (uint64_t *)p, __ATOMIC_RELEASE);
			}
		}
		if (fd >= 0) {
			close(fd);
		}
	}
	m = mock_cnt_map;
	pthread_mutex_unlock(&mock_cnt_mu);
	return m;
}

static inline void mock_count(int slot, uint64_t n) {
	uint64_t *m = mock_cnt_slots();
	if (m != NULL && slot >= 0 && slot < MOCK_CNT_SLOTS) {
		__atomic_fetch_add(&m[slot], n, __ATOMIC_RELAXED);
	}
}

/* mock_count_gemm counts one GEMM call of batch products whose A and B are
 * atype (cudaDataType_t; the mocks accept only matching A and B types) with
 * the given cublasComputeType_t. */
static inline void mock_count_gemm(int atype, int compute, long long batch) {
	int in = atype == 0 ? MOCK_IN_32F : atype == 14 ? MOCK_IN_16BF : MOCK_IN_OTHER;
	int ct = MOCK_CT_OTHER;
	switch (compute) {
	case 68:
		ct = MOCK_CT_32F;
		break;
	case 69:
		ct = MOCK_CT_32F_PEDANTIC;
		break;
	case 74:
		ct = MOCK_CT_32F_FAST_16F;
		break;
	case 75:
		ct = MOCK_CT_32F_FAST_16BF;
		break;
	case 77:
		ct = MOCK_CT_32F_FAST_TF32;
		break;
	}
	mock_count(MOCK_CNT_GEMM + in * MOCK_CNT_COMPUTES + ct, 1);
	mock_count(MOCK_CNT_GEMM_PRODUCTS + in * MOCK_CNT_COMPUTES + ct, batch > 0 ? (uint64_t)batch : 0);
}

#endif /* MOCK_COUNTERS_H */
