/*
 * gt_nccl.h: our own declarations of the NCCL API gotrain calls, written
 * from the published ABI (nccl.h of 2.3.5 through 2.30: calls and enum
 * values were only ever appended, never renumbered), plus a table of
 * dlsym'd function pointers and static inline trampolines, because cgo
 * cannot call a C function pointer directly.
 *
 * ncclUniqueId is passed by value (128 bytes, on the stack on x86-64):
 * the trampolines take it by pointer from Go and let the C compiler pass it
 * as the ABI wants. Streams cross as uintptr_t: cudaStream_t and the
 * driver's CUstream are the same struct pointer.
 *
 * Include gt_dl.h first.
 */
#ifndef GT_NCCL_H
#define GT_NCCL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define GT_NCCL_UNIQUE_ID_BYTES 128

typedef struct gt_ncclComm *gt_ncclComm_t;
typedef struct gt_nccl_CUstream_st *gt_nccl_stream_t;
typedef struct {
	char internal[GT_NCCL_UNIQUE_ID_BYTES];
} gt_ncclUniqueId;

/* ncclResult_t. The ncclNum* sentinels moved as values were appended, so
 * none is declared here. */
typedef int gt_ncclResult_t;
enum {
	GT_ncclSuccess = 0,
	GT_ncclUnhandledCudaError = 1,
	GT_ncclSystemError = 2,
	GT_ncclInternalError = 3,
	GT_ncclInvalidArgument = 4,
	GT_ncclInvalidUsage = 5,
	GT_ncclRemoteError = 6, /* 2.13.4 */
	GT_ncclInProgress = 7,  /* 2.14.3 */
	GT_ncclTimeout = 8      /* 2.30.3 */
};

/* ncclRedOp_t: an int-sized enum. */
typedef int gt_ncclRedOp_t;
enum { GT_ncclSum = 0, GT_ncclProd = 1, GT_ncclMax = 2, GT_ncclMin = 3, GT_ncclAvg = 4 /* 2.10.3 */ };

/* ncclDataType_t */
typedef int gt_ncclDataType_t;
enum {
	GT_ncclInt8 = 0,
	GT_ncclUint8 = 1,
	GT_ncclInt32 = 2,
	GT_ncclUint32 = 3,
	GT_ncclInt64 = 4,
	GT_ncclUint64 = 5,
	GT_ncclFloat16 = 6,
	GT_ncclFloat32 = 7,
	GT_ncclFloat64 = 8,
	GT_ncclBfloat16 = 9 /* 2.10.3 */
};

/* NCCL_API_MAGIC, checked by ncclCommInitRankConfig. */
#define GT_NCCL_CONFIG_MAGIC 0xcafebeefu

/* The leading fields of ncclConfig_t, which NCCL has kept since 2.14
 * (ncclConfig_v22800 of 2.28 still starts with them). NCCL copies
 * min(size, its own sizeof) bytes over a default config and resets every
 * field newer than `version` to its default, so this short prefix is a
 * valid config for every release that has the call. */
typedef struct {
	size_t size;
	unsigned int magic;
	unsigned int version;
	int blocking;
} gt_ncclConfig_t;

/* The bytes of gt_ncclConfig_t that are NCCL's fields. sizeof adds 4 bytes
 * of tail padding, which NCCL would read as its next field
 * (cgaClusterSize); a size that stops at `blocking` leaves that field at
 * NCCL's default whatever `version` says. */
#define GT_NCCL_CONFIG_BYTES (offsetof(gt_ncclConfig_t, blocking) + sizeof(int))

_Static_assert(sizeof(gt_ncclUniqueId) == 128, "ncclUniqueId is NCCL_UNIQUE_ID_BYTES");
_Static_assert(offsetof(gt_ncclConfig_t, magic) == 8 && offsetof(gt_ncclConfig_t, version) == 12 &&
                   offsetof(gt_ncclConfig_t, blocking) == 16,
               "ncclConfig_t's leading fields, as in nccl.h 2.14 through 2.28");

typedef gt_ncclResult_t (*gt_ncclGetVersion_fn)(int *version);
typedef gt_ncclResult_t (*gt_ncclGetUniqueId_fn)(gt_ncclUniqueId *id);
typedef gt_ncclResult_t (*gt_ncclCommInitRank_fn)(gt_ncclComm_t *comm, int nranks, gt_ncclUniqueId id, int rank);
typedef gt_ncclResult_t (*gt_ncclCommInitRankConfig_fn)(gt_ncclComm_t *comm, int nranks, gt_ncclUniqueId id, int rank,
                                                        gt_ncclConfig_t *config);
typedef gt_ncclResult_t (*gt_ncclCommOp_fn)(gt_ncclComm_t comm); /* Finalize, Destroy, Abort */
typedef gt_ncclResult_t (*gt_ncclCommGetAsyncError_fn)(gt_ncclComm_t comm, gt_ncclResult_t *err);
typedef gt_ncclResult_t (*gt_ncclCommInt_fn)(const gt_ncclComm_t comm, int *out); /* Count, UserRank */
typedef const char *(*gt_ncclGetErrorString_fn)(gt_ncclResult_t result);
typedef const char *(*gt_ncclGetLastError_fn)(gt_ncclComm_t comm);
typedef gt_ncclResult_t (*gt_ncclAllReduce_fn)(const void *send, void *recv, size_t count, gt_ncclDataType_t dt,
                                               gt_ncclRedOp_t op, gt_ncclComm_t comm, gt_nccl_stream_t stream);
typedef gt_ncclResult_t (*gt_ncclReduceScatter_fn)(const void *send, void *recv, size_t recvcount, gt_ncclDataType_t dt,
                                                   gt_ncclRedOp_t op, gt_ncclComm_t comm, gt_nccl_stream_t stream);
typedef gt_ncclResult_t (*gt_ncclAllGather_fn)(const void *send, void *recv, size_t sendcount, gt_ncclDataType_t dt,
                                               gt_ncclComm_t comm, gt_nccl_stream_t stream);
typedef gt_ncclResult_t (*gt_ncclBroadcast_fn)(const void *send, void *recv, size_t count, gt_ncclDataType_t dt, int root,
                                               gt_ncclComm_t comm, gt_nccl_stream_t stream);
typedef gt_ncclResult_t (*gt_ncclSend_fn)(const void *send, size_t count, gt_ncclDataType_t dt, int peer,
                                          gt_ncclComm_t comm, gt_nccl_stream_t stream);
typedef gt_ncclResult_t (*gt_ncclRecv_fn)(void *recv, size_t count, gt_ncclDataType_t dt, int peer,
                                          gt_ncclComm_t comm, gt_nccl_stream_t stream);
typedef gt_ncclResult_t (*gt_ncclGroup_fn)(void); /* GroupStart, GroupEnd */

/* The resolved entry points. Those marked with a version are NULL in older
 * libraries; the Go side turns a NULL into "needs NCCL x.y.z". */
typedef struct {
	void *get_version;        /* ncclGetVersion */
	void *get_unique_id;      /* ncclGetUniqueId */
	void *comm_init_rank;     /* ncclCommInitRank */
	void *comm_destroy;       /* ncclCommDestroy */
	void *comm_count;         /* ncclCommCount */
	void *comm_user_rank;     /* ncclCommUserRank */
	void *get_error_string;   /* ncclGetErrorString */
	void *all_reduce;         /* ncclAllReduce */
	void *reduce_scatter;     /* ncclReduceScatter */
	void *all_gather;         /* ncclAllGather */
	void *broadcast;          /* ncclBroadcast */
	void *group_start;        /* ncclGroupStart */
	void *group_end;          /* ncclGroupEnd */
	void *comm_abort;         /* ncclCommAbort, 2.4.2 */
	void *comm_get_async_error; /* ncclCommGetAsyncError, 2.4.2 */
	void *send;               /* ncclSend, 2.7.3 */
	void *recv;               /* ncclRecv, 2.7.3 */
	void *get_last_error;     /* ncclGetLastError, 2.13.4 */
	void *comm_init_rank_config; /* ncclCommInitRankConfig, 2.14.3 */
	void *comm_finalize;      /* ncclCommFinalize, 2.14.3 */
} gt_nccl_fns;

/* gt_nccl_resolve fills f and returns how many required symbols are
 * missing (lib->err names them); optional ones are left NULL silently. */
static inline int gt_nccl_resolve(gt_dl_lib *lib, gt_nccl_fns *f) {
	int missing = 0;
#define GT_NCCL_REQ(field, name) \
	if ((f->field = gt_dl_sym(lib, name)) == NULL) missing++;
	GT_NCCL_REQ(get_version, "ncclGetVersion")
	GT_NCCL_REQ(get_unique_id, "ncclGetUniqueId")
	GT_NCCL_REQ(comm_init_rank, "ncclCommInitRank")
	GT_NCCL_REQ(comm_destroy, "ncclCommDestroy")
	GT_NCCL_REQ(comm_count, "ncclCommCount")
	GT_NCCL_REQ(comm_user_rank, "ncclCommUserRank")
	GT_NCCL_REQ(get_error_string, "ncclGetErrorString")
	GT_NCCL_REQ(all_reduce, "ncclAllReduce")
	GT_NCCL_REQ(reduce_scatter, "ncclReduceScatter")
	GT_NCCL_REQ(all_gather, "ncclAllGather")
	GT_NCCL_REQ(broadcast, "ncclBroadcast")
	GT_NCCL_REQ(group_start, "ncclGroupStart")
	GT_NCCL_REQ(group_end, "ncclGroupEnd")
#undef GT_NCCL_REQ
	if (missing == 0) {
		size_t keep = strlen(lib->err);
		f->comm_abort = gt_dl_sym(lib, "ncclCommAbort");
		f->comm_get_async_error = gt_dl_sym(lib, "ncclCommGetAsyncError");
		f->send = gt_dl_sym(lib, "ncclSend");
		f->recv = gt_dl_sym(lib, "ncclRecv");
		f->get_last_error = gt_dl_sym(lib, "ncclGetLastError");
		f->comm_init_rank_config = gt_dl_sym(lib, "ncclCommInitRankConfig");
		f->comm_finalize = gt_dl_sym(lib, "ncclCommFinalize");
		lib->err[keep] = '\0';
	}
	return missing;
}

/* Communicators cross the trampolines as uintptr_t, as the Go side keeps
 * them (an integer it can swap atomically for Abort); the casts live here.
 *
 * Every call that can fail takes a buffer for ncclGetLastError's text:
 * NCCL keeps it per OS thread, and a goroutine may change threads between
 * two cgo calls, so it is read in the same C call that failed. buf may be
 * NULL. */
static inline gt_ncclResult_t gt_nccl_finish(const gt_nccl_fns *f, gt_ncclResult_t rc, char *buf, size_t n) {
	if (rc != GT_ncclSuccess && buf != NULL && n > 0) {
		const char *s = f->get_last_error ? ((gt_ncclGetLastError_fn)f->get_last_error)(NULL) : NULL;
		size_t len = s ? strlen(s) : 0;
		if (len >= n) {
			len = n - 1;
		}
		if (len > 0) {
			memcpy(buf, s, len);
		}
		buf[len] = '\0';
	}
	return rc;
}

#define GT_NCCL_COMM(c) ((gt_ncclComm_t)(c))

static inline gt_ncclResult_t gt_nccl_get_version(const gt_nccl_fns *f, int *v) {
	return ((gt_ncclGetVersion_fn)f->get_version)(v);
}

static inline gt_ncclResult_t gt_nccl_get_unique_id(const gt_nccl_fns *f, gt_ncclUniqueId *id, char *buf, size_t n) {
	return gt_nccl_finish(f, ((gt_ncclGetUniqueId_fn)f->get_unique_id)(id), buf, n);
}

/* The id is copied in C and passed by value, as the ABI wants. */
static inline gt_ncclResult_t gt_nccl_comm_init_rank(const gt_nccl_fns *f, uintptr_t *comm, int nranks,
                                                     const gt_ncclUniqueId *id, int rank, char *buf, size_t n) {
	gt_ncclComm_t c = NULL;
	gt_ncclResult_t rc = ((gt_ncclCommInitRank_fn)f->comm_init_rank)(&c, nranks, *id, rank);
	*comm = (uintptr_t)c;
	return gt_nccl_finish(f, rc, buf, n);
}

/* blocking is 1 or 0; version tells NCCL which fields of the config we
 * know (2.14.0, encoded 21400), so it defaults every later one. */
static inline gt_ncclResult_t gt_nccl_comm_init_rank_config(const gt_nccl_fns *f, uintptr_t *comm, int nranks,
                                                            const gt_ncclUniqueId *id, int rank, int blocking,
                                                            char *buf, size_t n) {
	gt_ncclConfig_t cfg;
	gt_ncclComm_t c = NULL;
	memset(&cfg, 0, sizeof(cfg));
	cfg.size = GT_NCCL_CONFIG_BYTES;
	cfg.magic = GT_NCCL_CONFIG_MAGIC;
	cfg.version = 21400;
	cfg.blocking = blocking;
	gt_ncclResult_t rc = ((gt_ncclCommInitRankConfig_fn)f->comm_init_rank_config)(&c, nranks, *id, rank, &cfg);
	*comm = (uintptr_t)c;
	return gt_nccl_finish(f, rc, buf, n);
}

/* gt_nccl_comm_call runs one of Finalize, Destroy, Abort (fn). */
static inline gt_ncclResult_t gt_nccl_comm_call(const gt_nccl_fns *f, void *fn, uintptr_t comm, char *buf, size_t n) {
	return gt_nccl_finish(f, ((gt_ncclCommOp_fn)fn)(GT_NCCL_COMM(comm)), buf, n);
}

static inline gt_ncclResult_t gt_nccl_comm_get_async_error(const gt_nccl_fns *f, uintptr_t comm, gt_ncclResult_t *err,
                                                           char *buf, size_t n) {
	return gt_nccl_finish(f, ((gt_ncclCommGetAsyncError_fn)f->comm_get_async_error)(GT_NCCL_COMM(comm), err), buf, n);
}

/* gt_nccl_comm_int runs ncclCommCount or ncclCommUserRank (fn). */
static inline gt_ncclResult_t gt_nccl_comm_int(const gt_nccl_fns *f, void *fn, uintptr_t comm, int *out, char *buf,
                                               size_t n) {
	return gt_nccl_finish(f, ((gt_ncclCommInt_fn)fn)(GT_NCCL_COMM(comm), out), buf, n);
}

static inline const char *gt_nccl_get_error_string(const gt_nccl_fns *f, gt_ncclResult_t r) {
	return ((gt_ncclGetErrorString_fn)f->get_error_string)(r);
}

/* Device pointers cross as uint64_t (CUdeviceptr), streams as uintptr_t. */
static inline gt_ncclResult_t gt_nccl_all_reduce(const gt_nccl_fns *f, uint64_t send, uint64_t recv, size_t count,
                                                 gt_ncclDataType_t dt, gt_ncclRedOp_t op, uintptr_t comm, uintptr_t s,
                                                 char *buf, size_t n) {
	return gt_nccl_finish(f, ((gt_ncclAllReduce_fn)f->all_reduce)((const void *)(uintptr_t)send, (void *)(uintptr_t)recv,
	                                                              count, dt, op, GT_NCCL_COMM(comm), (gt_nccl_stream_t)s),
	                      buf, n);
}

static inline gt_ncclResult_t gt_nccl_reduce_scatter(const gt_nccl_fns *f, uint64_t send, uint64_t recv, size_t recvcount,
                                                     gt_ncclDataType_t dt, gt_ncclRedOp_t op, uintptr_t comm,
                                                     uintptr_t s, char *buf, size_t n) {
	return gt_nccl_finish(f, ((gt_ncclReduceScatter_fn)f->reduce_scatter)((const void *)(uintptr_t)send,
	                                                                      (void *)(uintptr_t)recv, recvcount, dt, op,
	                                                                      GT_NCCL_COMM(comm), (gt_nccl_stream_t)s),
	                      buf, n);
}

static inline gt_ncclResult_t gt_nccl_all_gather(const gt_nccl_fns *f, uint64_t send, uint64_t recv, size_t sendcount,
                                                 gt_ncclDataType_t dt, uintptr_t comm, uintptr_t s, char *buf, size_t n) {
	return gt_nccl_finish(f, ((gt_ncclAllGather_fn)f->all_gather)((const void *)(uintptr_t)send, (void *)(uintptr_t)recv,
	                                                              sendcount, dt, GT_NCCL_COMM(comm), (gt_nccl_stream_t)s),
	                      buf, n);
}

static inline gt_ncclResult_t gt_nccl_broadcast(const gt_nccl_fns *f, uint64_t send, uint64_t recv, size_t count,
                                                gt_ncclDataType_t dt, int root, uintptr_t comm, uintptr_t s, char *buf,
                                                size_t n) {
	return gt_nccl_finish(f, ((gt_ncclBroadcast_fn)f->broadcast)((const void *)(uintptr_t)send, (void *)(uintptr_t)recv,
	                                                             count, dt, root, GT_NCCL_COMM(comm), (gt_nccl_stream_t)s),
	                      buf, n);
}

static inline gt_ncclResult_t gt_nccl_send(const gt_nccl_fns *f, uint64_t send, size_t count, gt_ncclDataType_t dt,
                                           int peer, uintptr_t comm, uintptr_t s, char *buf, size_t n) {
	return gt_nccl_finish(f, ((gt_ncclSend_fn)f->send)((const void *)(uintptr_t)send, count, dt, peer, GT_NCCL_COMM(comm),
	                                                   (gt_nccl_stream_t)s),
	                      buf, n);
}

static inline gt_ncclResult_t gt_nccl_recv(const gt_nccl_fns *f, uint64_t recv, size_t count, gt_ncclDataType_t dt,
                                           int peer, uintptr_t comm, uintptr_t s, char *buf, size_t n) {
	return gt_nccl_finish(f, ((gt_ncclRecv_fn)f->recv)((void *)(uintptr_t)recv, count, dt, peer, GT_NCCL_COMM(comm),
	                                                   (gt_nccl_stream_t)s),
	                      buf, n);
}

static inline gt_ncclResult_t gt_nccl_group_start(const gt_nccl_fns *f, char *buf, size_t n) {
	return gt_nccl_finish(f, ((gt_ncclGroup_fn)f->group_start)(), buf, n);
}

static inline gt_ncclResult_t gt_nccl_group_end(const gt_nccl_fns *f, char *buf, size_t n) {
	return gt_nccl_finish(f, ((gt_ncclGroup_fn)f->group_end)(), buf, n);
}

#endif /* GT_NCCL_H */
