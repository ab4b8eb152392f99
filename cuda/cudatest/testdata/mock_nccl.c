/*
 * mock_nccl.c: a CPU stand-in for libnccl.so.2, built with gcc by
 * cudatest.BuildMockNCCL for tests and loaded through GOTRAIN_LIBNCCL. It
 * exports the NCCL symbols gotrain resolves, with the real C signatures and
 * enum values, and moves real data: "device" pointers are host pointers
 * (the mock libcuda allocates device memory with malloc), so collectives
 * read and write them directly.
 *
 * Ranks are threads of one process. ncclCommInitRank rendezvouses the
 * nranks callers presenting the same unique id in a process-wide table.
 * Every operation completes synchronously at the call (or, inside a group,
 * at ncclGroupEnd): a collective returns once every rank of the
 * communicator has called it, with every output written, so a later stream
 * synchronisation has nothing left to wait for. The stream argument is
 * accepted and ignored.
 *
 * Stricter than NCCL where that catches caller bugs: ranks that disagree on
 * a collective's kind, count, type, op or root all get ncclInvalidArgument
 * instead of a hang.
 *
 * Build options:
 *   -DMOCK_NCCL_VERSION=N  what ncclGetVersion reports, in NCCL's own
 *                          encoding (2708 for 2.7.8, 21903 for 2.19.3).
 *                          Calls and features newer than N are left out,
 *                          as in the real release: bf16 and ncclAvg need
 *                          2.10.3, ncclGetLastError 2.13.4,
 *                          ncclCommInitRankConfig and ncclCommFinalize 2.14.3.
 *
 * Limits: one rank per OS thread (a group holding operations of several
 * communicators of one thread would wait for itself); reductions support
 * int32, float32, float64, bfloat16 and float16; data movement supports
 * every type.
 */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef MOCK_NCCL_VERSION
#define MOCK_NCCL_VERSION 21903
#endif

/* The version normalised to the new encoding, for feature tests. */
#define MOCK_V (MOCK_NCCL_VERSION < 10000 ? (MOCK_NCCL_VERSION / 1000) * 10000 + MOCK_NCCL_VERSION % 1000 : MOCK_NCCL_VERSION)
#define MOCK_HAS(maj, min, pat) (MOCK_V >= (maj) * 10000 + (min) * 100 + (pat))

#define EXPORT __attribute__((visibility("default")))

typedef enum {
	ncclSuccess = 0,
	ncclUnhandledCudaError = 1,
	ncclSystemError = 2,
	ncclInternalError = 3,
	ncclInvalidArgument = 4,
	ncclInvalidUsage = 5,
	ncclRemoteError = 6,
	ncclInProgress = 7
} ncclResult_t;

typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;

typedef enum {
	ncclInt8 = 0,
	ncclUint8 = 1,
	ncclInt32 = 2,
	ncclUint32 = 3,
	ncclInt64 = 4,
	ncclUint64 = 5,
	ncclFloat16 = 6,
	ncclFloat32 = 7,
	ncclFloat64 = 8,
	ncclBfloat16 = 9
} ncclDataType_t;

typedef struct {
	char internal[128];
} ncclUniqueId;

typedef struct {
	size_t size;
	unsigned int magic;
	unsigned int version;
	int blocking;
} ncclConfig_t;

typedef void *cudaStream_t;

/* What a peer that went away looks like to the others. */
#if MOCK_HAS(2, 13, 4)
#define MOCK_PEER_GONE ncclRemoteError
#else
#define MOCK_PEER_GONE ncclSystemError
#endif

enum { OP_ALLREDUCE = 1, OP_REDUCESCATTER, OP_ALLGATHER, OP_BROADCAST, OP_SEND, OP_RECV };

typedef struct {
	int kind;
	const void *send;
	void *recv;
	size_t count; /* AllReduce/Broadcast/Send/Recv: count; ReduceScatter: recvcount; AllGather: sendcount */
	int dtype;
	int op;
	int root; /* Broadcast root, or Send/Recv peer */
} op_t;

typedef struct message {
	int src, dst;
	int dtype;
	size_t count;
	void *data;
	struct message *next;
} message_t;

typedef struct clique clique_t;

struct ncclComm {
	clique_t *cl;
	int rank;
	int finalized;
	int inflight; /* calls inside the mock on this comm, guarded by cl->mu */
	int dead;     /* aborted or destroyed: waiting for inflight to drain */
};

struct clique {
	ncclUniqueId id;
	int nranks;
	int joined;
	int live; /* communicators not yet destroyed */
	struct ncclComm **comms;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int aborted;
	/* collective rendezvous */
	unsigned long gen;
	int arrived;
	op_t *slots;
	int result;
	char result_msg[512];
	/* point-to-point */
	message_t *mail;
	clique_t *next; /* in the table of forming cliques */
};

static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t table_cv = PTHREAD_COND_INITIALIZER;
static clique_t *forming;
static unsigned long id_counter;

/* NCCL keeps the last error text per thread. */
static __thread char last_error[512];

static ncclResult_t fail(ncclResult_t rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ncclResult_t fail(ncclResult_t rc, const char *fmt, ...) {
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_error, sizeof(last_error), fmt, ap);
	va_end(ap);
	return rc;
}

/* ---- types -------------------------------------------------------------- */

static size_t type_size(int dt) {
	switch (dt) {
	case ncclInt8:
	case ncclUint8:
		return 1;
	case ncclFloat16:
	case ncclBfloat16:
		return 2;
	case ncclInt32:
	case ncclUint32:
	case ncclFloat32:
		return 4;
	case ncclInt64:
	case ncclUint64:
	case ncclFloat64:
		return 8;
	}
	return 0;
}

static float bf16_to_f32(uint16_t h) {
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static uint16_t f32_to_bf16(float f) {
	uint32_t u;
	memcpy(&u, &f, 4);
	if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
		return (uint16_t)((u >> 16) | 0x0040u); /* quiet NaN, sign kept */
	}
	u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest, ties to even */
	return (uint16_t)(u >> 16);
}

/* IEEE binary16 to double, exactly. */
static double f16_to_f64(uint16_t h) {
	int e = (h >> 10) & 31, m = h & 1023;
	double v;
	if (e == 0) {
		v = ldexp((double)m, -24);
	} else if (e == 31) {
		v = m ? NAN : INFINITY;
	} else {
		v = ldexp((double)(1024 + m), e - 25);
	}
	return (h & 0x8000) ? -v : v;
}

/* double to IEEE binary16, rounded once to nearest, ties to even
 * (nearbyint in the default rounding mode), overflowing to infinity. */
static uint16_t f64_to_f16(double v) {
	uint16_t sign = signbit(v) ? 0x8000 : 0;
	double a = fabs(v);
	if (isnan(v)) {
		return sign | 0x7e00;
	}
	if (a == 0) {
		return sign;
	}
	int e;
	frexp(a, &e);
	int E = e - 1 < -14 ? -14 : e - 1; /* below 2^-14 the step stays 2^-24 */
	double q = ldexp(1.0, E - 10);
	double r = nearbyint(a / q) * q;
	if (r > 65504.0) {
		return sign | 0x7c00;
	}
	if (r < ldexp(1.0, -14)) {
		return sign | (uint16_t)(r / ldexp(1.0, -24));
	}
	frexp(r, &e);
	E = e - 1;
	return sign | (uint16_t)((E + 15) << 10) | (uint16_t)(r / ldexp(1.0, E - 10) - 1024);
}

/* element i of buffer p as double (reducible types only) */
static double load(const void *p, int dt, size_t i) {
	switch (dt) {
	case ncclInt32:
		return (double)((const int32_t *)p)[i];
	case ncclFloat32:
		return (double)((const float *)p)[i];
	case ncclFloat64:
		return ((const double *)p)[i];
	case ncclBfloat16:
		return (double)bf16_to_f32(((const uint16_t *)p)[i]);
	case ncclFloat16:
		return f16_to_f64(((const uint16_t *)p)[i]);
	}
	return 0;
}

static void store(void *p, int dt, size_t i, double v) {
	switch (dt) {
	case ncclInt32:
		((int32_t *)p)[i] = (int32_t)v;
		break;
	case ncclFloat32:
		((float *)p)[i] = (float)v;
		break;
	case ncclFloat64:
		((double *)p)[i] = v;
		break;
	case ncclBfloat16:
		((uint16_t *)p)[i] = f32_to_bf16((float)v);
		break;
	case ncclFloat16:
		((uint16_t *)p)[i] = f64_to_f16(v);
		break;
	}
}

static int reducible(int dt) {
	return dt == ncclInt32 || dt == ncclFloat32 || dt == ncclFloat64 || dt == ncclBfloat16 || dt == ncclFloat16;
}

static ncclResult_t check_type(int dt, int reduce) {
	if (type_size(dt) == 0) {
		return fail(ncclInvalidArgument, "mock nccl: invalid data type %d", dt);
	}
#if !MOCK_HAS(2, 10, 3)
	if (dt == ncclBfloat16) {
		return fail(ncclInvalidArgument, "mock nccl %d: invalid data type %d (bfloat16 needs 2.10.3)", MOCK_NCCL_VERSION, dt);
	}
#endif
	if (reduce && !reducible(dt)) {
		return fail(ncclInvalidArgument, "mock nccl: reductions on data type %d are outside this mock (int32, float32, float64, bfloat16, float16)", dt);
	}
	return ncclSuccess;
}

static ncclResult_t check_op(int op) {
	int max = MOCK_HAS(2, 10, 3) ? ncclAvg : ncclMin;
	if (op < 0 || op > max) {
		return fail(ncclInvalidArgument, "mock nccl %d: invalid reduction op %d", MOCK_NCCL_VERSION, op);
	}
	return ncclSuccess;
}

/* ---- version, ids, errors ------------------------------------------------ */

EXPORT ncclResult_t ncclGetVersion(int *version) {
	if (version == NULL) {
		return fail(ncclInvalidArgument, "mock nccl: ncclGetVersion: version is NULL");
	}
	*version = MOCK_NCCL_VERSION;
	return ncclSuccess;
}

EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
	if (id == NULL) {
		return fail(ncclInvalidArgument, "mock nccl: ncclGetUniqueId: uniqueId is NULL");
	}
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	pthread_mutex_lock(&table_mu);
	unsigned long n = ++id_counter;
	pthread_mutex_unlock(&table_mu);
	memset(id, 0, sizeof(*id));
	/* Every byte matters to the table, so spread the fields over all 128. */
	for (int i = 0; i < 128; i++) {
		unsigned long x = n * 0x9E3779B97F4A7C15ul ^ ((unsigned long)ts.tv_nsec << (i % 7)) ^ ((unsigned long)getpid() * (i + 1));
		id->internal[i] = (char)(x >> ((i * 5) % 56));
	}
	memcpy(id->internal, "MOCKNCCL", 8);
	memcpy(id->internal + 8, &n, sizeof(n));
	return ncclSuccess;
}

EXPORT const char *ncclGetErrorString(ncclResult_t r) {
	switch (r) {
	case ncclSuccess:
		return "mock: no error";
	case ncclUnhandledCudaError:
		return "mock: a CUDA call failed";
	case ncclSystemError:
		return "mock: system error or a peer went away";
	case ncclInternalError:
		return "mock: internal error";
	case ncclInvalidArgument:
		return "mock: invalid argument";
	case ncclInvalidUsage:
		return "mock: invalid usage";
	case ncclRemoteError:
		return "mock: a remote rank failed or aborted";
	case ncclInProgress:
		return "mock: operation in progress";
	}
	return "mock: unknown result code";
}

#if MOCK_HAS(2, 13, 4)
EXPORT const char *ncclGetLastError(void *comm) {
	(void)comm;
	return last_error;
}
#endif

/* ---- communicators ------------------------------------------------------- */

static ncclResult_t init_rank(struct ncclComm **out, int nranks, const ncclUniqueId *id, int rank) {
	if (out == NULL) {
		return fail(ncclInvalidArgument, "mock nccl: ncclCommInitRank: comm is NULL");
	}
	if (nranks < 1 || rank < 0 || rank >= nranks) {
		return fail(ncclInvalidArgument, "mock nccl: ncclCommInitRank: rank %d of %d is out of range", rank, nranks);
	}
	if (memcmp(id->internal, "MOCKNCCL", 8) != 0) {
		return fail(ncclInvalidArgument, "mock nccl: ncclCommInitRank: unique id was not made by ncclGetUniqueId");
	}
	pthread_mutex_lock(&table_mu);
	clique_t *cl = forming;
	while (cl != NULL && memcmp(&cl->id, id, sizeof(*id)) != 0) {
		cl = cl->next;
	}
	if (cl == NULL) {
		cl = calloc(1, sizeof(*cl));
		cl->id = *id;
		cl->nranks = nranks;
		cl->live = nranks;
		cl->comms = calloc((size_t)nranks, sizeof(*cl->comms));
		cl->slots = calloc((size_t)nranks, sizeof(*cl->slots));
		pthread_mutex_init(&cl->mu, NULL);
		pthread_cond_init(&cl->cv, NULL);
		cl->next = forming;
		forming = cl;
	}
	if (cl->nranks != nranks) {
		int want = cl->nranks;
		pthread_mutex_unlock(&table_mu);
		return fail(ncclInvalidArgument, "mock nccl: ncclCommInitRank: nranks %d, but rank(s) before said %d", nranks, want);
	}
	if (cl->comms[rank] != NULL) {
		pthread_mutex_unlock(&table_mu);
		return fail(ncclInvalidUsage, "mock nccl: ncclCommInitRank: rank %d joined twice", rank);
	}
	struct ncclComm *c = calloc(1, sizeof(*c));
	c->cl = cl;
	c->rank = rank;
	cl->comms[rank] = c;
	if (++cl->joined == nranks) {
		/* complete: take it out of the table so the id may not be reused */
		clique_t **pp = &forming;
		while (*pp != cl) {
			pp = &(*pp)->next;
		}
		*pp = cl->next;
		pthread_cond_broadcast(&table_cv);
	}
	while (cl->joined < nranks) {
		pthread_cond_wait(&table_cv, &table_mu);
	}
	pthread_mutex_unlock(&table_mu);
	*out = c;
	return ncclSuccess;
}

EXPORT ncclResult_t ncclCommInitRank(struct ncclComm **comm, int nranks, ncclUniqueId id, int rank) {
	return init_rank(comm, nranks, &id, rank);
}

#if MOCK_HAS(2, 14, 3)
EXPORT ncclResult_t ncclCommInitRankConfig(struct ncclComm **comm, int nranks, ncclUniqueId id, int rank,
                                           ncclConfig_t *config) {
	if (config != NULL && (config->magic != 0xcafebeefu || config->size < sizeof(size_t) + 2 * sizeof(unsigned))) {
		return fail(ncclInvalidArgument, "mock nccl: ncclCommInitRankConfig: bad config magic 0x%x or size %zu",
		            config->magic, config->size);
	}
	return init_rank(comm, nranks, &id, rank);
}
#endif

/* enter/leave bracket every call that uses a communicator, so that Abort
 * and Destroy free it only after the last call on it has returned. */
static ncclResult_t enter(struct ncclComm *c, const char *fn) {
	if (c == NULL) {
		return fail(ncclInvalidArgument, "mock nccl: %s: comm is NULL", fn);
	}
	pthread_mutex_lock(&c->cl->mu);
	if (c->dead) {
		pthread_mutex_unlock(&c->cl->mu);
		return fail(ncclInvalidUsage, "mock nccl: %s: communicator was destroyed or aborted", fn);
	}
	c->inflight++;
	pthread_mutex_unlock(&c->cl->mu);
	return ncclSuccess;
}

static void leave(struct ncclComm *c) {
	pthread_mutex_lock(&c->cl->mu);
	c->inflight--;
	pthread_cond_broadcast(&c->cl->cv);
	pthread_mutex_unlock(&c->cl->mu);
}

/* release marks c dead, waits for its calls to drain and frees it; the
 * clique goes with its last communicator. With abort set, every peer's
 * pending and later calls fail. */
static ncclResult_t release(struct ncclComm *c, int abort, const char *fn) {
	if (c == NULL) {
		return fail(ncclInvalidArgument, "mock nccl: %s: comm is NULL", fn);
	}
	clique_t *cl = c->cl;
	pthread_mutex_lock(&cl->mu);
	if (c->dead) {
		pthread_mutex_unlock(&cl->mu);
		return fail(ncclInvalidUsage, "mock nccl: %s: communicator released twice", fn);
	}
	c->dead = 1;
	if (abort) {
		cl->aborted = 1;
	}
	pthread_cond_broadcast(&cl->cv);
	while (c->inflight > 0) {
		pthread_cond_wait(&cl->cv, &cl->mu);
	}
	cl->comms[c->rank] = NULL;
	int last = --cl->live == 0;
	pthread_mutex_unlock(&cl->mu);
	free(c);
	if (last) {
		for (message_t *m = cl->mail, *next; m != NULL; m = next) {
			next = m->next;
			free(m->data);
			free(m);
		}
		pthread_mutex_destroy(&cl->mu);
		pthread_cond_destroy(&cl->cv);
		free(cl->comms);
		free(cl->slots);
		free(cl);
	}
	return ncclSuccess;
}

EXPORT ncclResult_t ncclCommDestroy(struct ncclComm *comm) { return release(comm, 0, "ncclCommDestroy"); }

#if MOCK_HAS(2, 4, 2)
EXPORT ncclResult_t ncclCommAbort(struct ncclComm *comm) { return release(comm, 1, "ncclCommAbort"); }

EXPORT ncclResult_t ncclCommGetAsyncError(struct ncclComm *comm, ncclResult_t *err) {
	ncclResult_t rc = enter(comm, "ncclCommGetAsyncError");
	if (rc != ncclSuccess) {
		return rc;
	}
	if (err == NULL) {
		leave(comm);
		return fail(ncclInvalidArgument, "mock nccl: ncclCommGetAsyncError: asyncError is NULL");
	}
	pthread_mutex_lock(&comm->cl->mu);
	*err = comm->cl->aborted ? MOCK_PEER_GONE : ncclSuccess;
	pthread_mutex_unlock(&comm->cl->mu);
	leave(comm);
	return ncclSuccess;
}
#endif

#if MOCK_HAS(2, 14, 3)
EXPORT ncclResult_t ncclCommFinalize(struct ncclComm *comm) {
	ncclResult_t rc = enter(comm, "ncclCommFinalize");
	if (rc != ncclSuccess) {
		return rc;
	}
	/* Nothing is ever pending in this mock; later operations are refused. */
	comm->finalized = 1;
	leave(comm);
	return ncclSuccess;
}
#endif

EXPORT ncclResult_t ncclCommCount(const struct ncclComm *comm, int *count) {
	if (comm == NULL || count == NULL) {
		return fail(ncclInvalidArgument, "mock nccl: ncclCommCount: NULL argument");
	}
	*count = comm->cl->nranks;
	return ncclSuccess;
}

EXPORT ncclResult_t ncclCommUserRank(const struct ncclComm *comm, int *rank) {
	if (comm == NULL || rank == NULL) {
		return fail(ncclInvalidArgument, "mock nccl: ncclCommUserRank: NULL argument");
	}
	*rank = comm->rank;
	return ncclSuccess;
}

/* ---- collectives ---------------------------------------------------------- */

static const char *kind_name(int kind) {
	switch (kind) {
	case OP_ALLREDUCE:
		return "ncclAllReduce";
	case OP_REDUCESCATTER:
		return "ncclReduceScatter";
	case OP_ALLGATHER:
		return "ncclAllGather";
	case OP_BROADCAST:
		return "ncclBroadcast";
	case OP_SEND:
		return "ncclSend";
	case OP_RECV:
		return "ncclRecv";
	}
	return "?";
}

/* reduce_into computes out[i] = op over ranks r of in[r][i], i < n,
 * accumulating in double in rank order and rounding once on store. */
static void reduce_into(void *out, const void *const *in, int nranks, size_t n, int dt, int op) {
	for (size_t i = 0; i < n; i++) {
		double acc = load(in[0], dt, i);
		for (int r = 1; r < nranks; r++) {
			double v = load(in[r], dt, i);
			switch (op) {
			case ncclSum:
			case ncclAvg:
				acc += v;
				break;
			case ncclProd:
				acc *= v;
				break;
			case ncclMax:
				acc = v > acc ? v : acc;
				break;
			case ncclMin:
				acc = v < acc ? v : acc;
				break;
			}
		}
		if (op == ncclAvg) {
			acc = dt == ncclInt32 ? (double)((long long)acc / nranks) : acc / nranks;
		}
		store(out, dt, i, acc);
	}
}

/* execute runs the collective every rank has posted in cl->slots; the caller
 * holds cl->mu and is the last to arrive, so every buffer is in place and no
 * rank returns before this finishes. Inputs are staged first, so in-place
 * calls (send == recv, or send inside recv for AllGather) read what the
 * caller passed in. */
static ncclResult_t execute(clique_t *cl) {
	int n = cl->nranks;
	op_t *s = cl->slots;
	for (int r = 1; r < n; r++) {
		if (s[r].kind != s[0].kind || s[r].count != s[0].count || s[r].dtype != s[0].dtype ||
		    s[r].op != s[0].op || s[r].root != s[0].root) {
			return fail(ncclInvalidArgument,
			            "mock nccl: ranks disagree: rank 0 called %s(count %zu, type %d, op %d, root %d), rank %d called %s(count %zu, type %d, op %d, root %d)",
			            kind_name(s[0].kind), s[0].count, s[0].dtype, s[0].op, s[0].root, r, kind_name(s[r].kind),
			            s[r].count, s[r].dtype, s[r].op, s[r].root);
		}
	}
	size_t es = type_size(s[0].dtype);
	size_t count = s[0].count;
	size_t in_elems = count; /* per rank */
	if (s[0].kind == OP_REDUCESCATTER) {
		in_elems = count * (size_t)n;
	}
	if (s[0].kind == OP_BROADCAST) {
		/* only the root's input is read */
		void *stage = malloc(count * es);
		memcpy(stage, s[s[0].root].send, count * es);
		for (int r = 0; r < n; r++) {
			memcpy(s[r].recv, stage, count * es);
		}
		free(stage);
		return ncclSuccess;
	}
	char *stage = malloc(in_elems * es * (size_t)n);
	const void **in = calloc((size_t)n, sizeof(*in));
	for (int r = 0; r < n; r++) {
		memcpy(stage + (size_t)r * in_elems * es, s[r].send, in_elems * es);
		in[r] = stage + (size_t)r * in_elems * es;
	}
	switch (s[0].kind) {
	case OP_ALLREDUCE:
		reduce_into(s[0].recv, in, n, count, s[0].dtype, s[0].op);
		for (int r = 1; r < n; r++) {
			memcpy(s[r].recv, s[0].recv, count * es);
		}
		break;
	case OP_REDUCESCATTER: {
		const void **part = malloc(sizeof(*part) * (size_t)n);
		for (int dst = 0; dst < n; dst++) {
			for (int r = 0; r < n; r++) {
				part[r] = (const char *)in[r] + (size_t)dst * count * es;
			}
			reduce_into(s[dst].recv, part, n, count, s[0].dtype, s[0].op);
		}
		free(part);
		break;
	}
	case OP_ALLGATHER:
		for (int dst = 0; dst < n; dst++) {
			for (int r = 0; r < n; r++) {
				memcpy((char *)s[dst].recv + (size_t)r * count * es, in[r], count * es);
			}
		}
		break;
	}
	free(in);
	free(stage);
	return ncclSuccess;
}

static ncclResult_t rendezvous(struct ncclComm *c, const op_t *o) {
	clique_t *cl = c->cl;
	pthread_mutex_lock(&cl->mu);
	if (cl->aborted) {
		pthread_mutex_unlock(&cl->mu);
		return fail(MOCK_PEER_GONE, "mock nccl: %s: a rank of this communicator aborted", kind_name(o->kind));
	}
	cl->slots[c->rank] = *o;
	unsigned long gen = cl->gen;
	if (++cl->arrived == cl->nranks) {
		cl->result = execute(cl);
		snprintf(cl->result_msg, sizeof(cl->result_msg), "%s", cl->result ? last_error : "");
		cl->arrived = 0;
		cl->gen++;
		pthread_cond_broadcast(&cl->cv);
	} else {
		while (cl->gen == gen && !cl->aborted) {
			pthread_cond_wait(&cl->cv, &cl->mu);
		}
		if (cl->gen == gen) {
			pthread_mutex_unlock(&cl->mu);
			return fail(MOCK_PEER_GONE, "mock nccl: %s: a rank aborted while rank %d waited", kind_name(o->kind), c->rank);
		}
	}
	/* cl->result stays until every rank, this one included, arrives again */
	ncclResult_t rc = cl->result;
	if (rc != ncclSuccess) {
		snprintf(last_error, sizeof(last_error), "%s", cl->result_msg);
	}
	pthread_mutex_unlock(&cl->mu);
	return rc;
}

static ncclResult_t post_send(struct ncclComm *c, const op_t *o) {
	clique_t *cl = c->cl;
	size_t bytes = o->count * type_size(o->dtype);
	message_t *m = calloc(1, sizeof(*m));
	m->src = c->rank;
	m->dst = o->root;
	m->dtype = o->dtype;
	m->count = o->count;
	m->data = malloc(bytes ? bytes : 1);
	memcpy(m->data, o->send, bytes);
	pthread_mutex_lock(&cl->mu);
	if (cl->aborted) {
		pthread_mutex_unlock(&cl->mu);
		free(m->data);
		free(m);
		return fail(MOCK_PEER_GONE, "mock nccl: ncclSend: a rank of this communicator aborted");
	}
	message_t **pp = &cl->mail; /* append: messages between a pair stay in order */
	while (*pp != NULL) {
		pp = &(*pp)->next;
	}
	*pp = m;
	pthread_cond_broadcast(&cl->cv);
	pthread_mutex_unlock(&cl->mu);
	return ncclSuccess;
}

static ncclResult_t take_recv(struct ncclComm *c, const op_t *o) {
	clique_t *cl = c->cl;
	pthread_mutex_lock(&cl->mu);
	for (;;) {
		message_t **pp = &cl->mail;
		while (*pp != NULL && !((*pp)->src == o->root && (*pp)->dst == c->rank)) {
			pp = &(*pp)->next;
		}
		if (*pp != NULL) {
			message_t *m = *pp;
			*pp = m->next;
			pthread_mutex_unlock(&cl->mu);
			ncclResult_t rc = ncclSuccess;
			if (m->count != o->count || m->dtype != o->dtype) {
				rc = fail(ncclInvalidArgument, "mock nccl: ncclRecv on rank %d: peer %d sent %zu elements of type %d, receiving %zu of type %d",
				          c->rank, o->root, m->count, m->dtype, o->count, o->dtype);
			} else {
				memcpy(o->recv, m->data, o->count * type_size(o->dtype));
			}
			free(m->data);
			free(m);
			return rc;
		}
		if (cl->aborted) {
			pthread_mutex_unlock(&cl->mu);
			return fail(MOCK_PEER_GONE, "mock nccl: ncclRecv: a rank aborted while rank %d waited for %d", c->rank, o->root);
		}
		pthread_cond_wait(&cl->cv, &cl->mu);
	}
}

/* ---- groups ---------------------------------------------------------------- */

typedef struct {
	struct ncclComm *comm;
	op_t op;
} queued_t;

static __thread int group_depth;
static __thread queued_t *group_ops;
static __thread int group_len, group_cap;

static ncclResult_t run_one(struct ncclComm *c, const op_t *o) {
	switch (o->kind) {
	case OP_SEND:
		return post_send(c, o);
	case OP_RECV:
		return take_recv(c, o);
	}
	return rendezvous(c, o);
}

/* submit validates an operation and runs it now, or queues it inside a group. */
static ncclResult_t submit(struct ncclComm *c, const op_t *o) {
	const char *fn = kind_name(o->kind);
	ncclResult_t rc = enter(c, fn);
	if (rc != ncclSuccess) {
		return rc;
	}
	int reduce = o->kind == OP_ALLREDUCE || o->kind == OP_REDUCESCATTER;
	if (c->finalized) {
		rc = fail(ncclInvalidUsage, "mock nccl: %s: communicator was finalized", fn);
	} else if ((rc = check_type(o->dtype, reduce)) != ncclSuccess) {
	} else if (reduce && (rc = check_op(o->op)) != ncclSuccess) {
	} else if (o->count > 0 && ((o->kind != OP_RECV && o->send == NULL && !(o->kind == OP_BROADCAST && o->root != c->rank)) ||
	                            (o->kind != OP_SEND && o->recv == NULL))) {
		/* a broadcast reads send only on its root */
		rc = fail(ncclInvalidArgument, "mock nccl: %s: NULL buffer", fn);
	} else if ((o->kind == OP_BROADCAST || o->kind == OP_SEND || o->kind == OP_RECV) &&
	           (o->root < 0 || o->root >= c->cl->nranks)) {
		rc = fail(ncclInvalidArgument, "mock nccl: %s: %s %d out of range for %d ranks", fn,
		          o->kind == OP_BROADCAST ? "root" : "peer", o->root, c->cl->nranks);
	} else if (group_depth > 0) {
		if (group_len == group_cap) {
			group_cap = group_cap ? 2 * group_cap : 8;
			group_ops = realloc(group_ops, sizeof(*group_ops) * (size_t)group_cap);
		}
		group_ops[group_len].comm = c;
		group_ops[group_len].op = *o;
		group_len++;
		return ncclSuccess; /* enter's hold on c is released by ncclGroupEnd */
	} else if (o->count == 0 && o->kind != OP_SEND && o->kind != OP_RECV) {
		rc = ncclSuccess;
	} else {
		rc = run_one(c, o);
	}
	leave(c);
	return rc;
}

EXPORT ncclResult_t ncclGroupStart(void) {
	group_depth++;
	return ncclSuccess;
}

EXPORT ncclResult_t ncclGroupEnd(void) {
	if (group_depth == 0) {
		return fail(ncclInvalidUsage, "mock nccl: ncclGroupEnd without ncclGroupStart");
	}
	if (--group_depth > 0) {
		return ncclSuccess;
	}
	ncclResult_t first = ncclSuccess;
	char msg[sizeof(last_error)] = "";
	/* Sends first, so that the receives of every rank's group can complete
	 * whatever order the group listed them in. Everything runs even after a
	 * failure, so that peers waiting on a later operation are not stranded. */
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < group_len; i++) {
			queued_t *q = &group_ops[i];
			if ((q->op.kind == OP_SEND) != (pass == 0)) {
				continue;
			}
			ncclResult_t rc = ncclSuccess;
			if (!(q->op.count == 0 && q->op.kind != OP_SEND && q->op.kind != OP_RECV)) {
				rc = run_one(q->comm, &q->op);
			}
			if (rc != ncclSuccess && first == ncclSuccess) {
				first = rc;
				snprintf(msg, sizeof(msg), "%s", last_error);
			}
		}
	}
	for (int i = 0; i < group_len; i++) {
		leave(group_ops[i].comm);
	}
	group_len = 0;
	if (first != ncclSuccess) {
		snprintf(last_error, sizeof(last_error), "%s", msg);
	}
	return first;
}

EXPORT ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                                  struct ncclComm *comm, cudaStream_t stream) {
	(void)stream;
	op_t o = {OP_ALLREDUCE, send, recv, count, dt, op, 0};
	return submit(comm, &o);
}

EXPORT ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount, ncclDataType_t dt, ncclRedOp_t op,
                                      struct ncclComm *comm, cudaStream_t stream) {
	(void)stream;
	op_t o = {OP_REDUCESCATTER, send, recv, recvcount, dt, op, 0};
	return submit(comm, &o);
}

EXPORT ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendcount, ncclDataType_t dt,
                                  struct ncclComm *comm, cudaStream_t stream) {
	(void)stream;
	op_t o = {OP_ALLGATHER, send, recv, sendcount, dt, 0, 0};
	return submit(comm, &o);
}

EXPORT ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t dt, int root,
                                  struct ncclComm *comm, cudaStream_t stream) {
	(void)stream;
	op_t o = {OP_BROADCAST, send, recv, count, dt, 0, root};
	return submit(comm, &o);
}

#if MOCK_HAS(2, 7, 3)
EXPORT ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t dt, int peer, struct ncclComm *comm,
                             cudaStream_t stream) {
	(void)stream;
	op_t o = {OP_SEND, send, NULL, count, dt, 0, peer};
	return submit(comm, &o);
}

EXPORT ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t dt, int peer, struct ncclComm *comm,
                             cudaStream_t stream) {
	(void)stream;
	op_t o = {OP_RECV, NULL, recv, count, dt, 0, peer};
	return submit(comm, &o);
}
#endif
