/*
 * gt_emu.h: the CUDA execution model on the CPU, for tests. The only C++
 * header of csrc/: kernels are CUDA C++ (extern "C", overloads), so the
 * emulation compiles them with g++ after this header, which supplies the
 * dialect (__global__, __shared__, threadIdx, __syncthreads, warp
 * shuffles and votes, atomics, device math) and the runtime that executes
 * a launch.
 *
 * Execution model:
 *   - Blocks of a grid run one after another on the calling OS thread, in
 *     x, y, z order or in the order of another schedule (see "schedules").
 *     Every CUDA thread of a block is a fiber with its own stack; fibers run
 *     in thread-index order (or the schedule's) until they finish or reach
 *     a barrier. The switch is six registers and a stack pointer on x86-64;
 *     elsewhere ucontext, whose sigprocmask system call per switch costs
 *     459 against 35 ns per thread per barrier (-DGT_EMU_UCONTEXT forces
 *     it, for comparison).
 *   - __syncthreads waits for every thread of the block that has not exited;
 *     __syncwarp, shuffles and votes wait for every live lane of the warp
 *     (warps are 32 consecutive linear thread indices, as on hardware).
 *   - __shared__ is `static thread_local`: one instance per OS thread, which
 *     is one instance per running block, since blocks of one launch are
 *     sequential and launches on different OS threads (different mock
 *     devices) have their own. Its contents carry over between blocks, as
 *     stale shared memory does on a GPU.
 *   - A block whose threads wait at different barriers (a __syncthreads in
 *     divergent code, a shuffle some lanes never reach) is a deadlock on a
 *     GPU; here the launch fails with a message naming the waiting threads.
 *     A shuffle that reads a lane that has exited or does not exist fails
 *     the launch too (undefined on hardware).
 *   - Atomics are performed with the compiler's __atomic builtins; with
 *     sequential fibers they are trivially atomic within a launch.
 *
 * Kernel registration: the including file lists every kernel with
 * GT_EMU_KERNEL(name) between GT_EMU_TABLE_BEGIN and GT_EMU_TABLE_END; the
 * table and the gt_emu_* entry points below are exported for the mock
 * driver (cuda/cudatest) and for Go tests (kernels/emu).
 */
#ifndef GT_EMU_H
#define GT_EMU_H

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <type_traits>
#include <utility>

/* ---- dialect ---- */

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __shared__ static thread_local
#define __constant__ static const

struct gt_emu_uint3 {
	unsigned int x, y, z;
};
typedef gt_emu_uint3 uint3;
typedef gt_emu_uint3 dim3;

struct gt_emu_fiber;

/* gt_emu_context is a suspended fiber (or the scheduler). */
#if defined(__x86_64__) && !defined(GT_EMU_UCONTEXT)
struct gt_emu_context {
	void *sp;
};
/* gt_emu_switch_asm(save, load) pushes the callee-saved registers, stores
 * the stack pointer in *save, loads load and pops the registers saved
 * there: the System V ABI lets every other register be clobbered by a
 * call, so this is a complete switch between C++ frames. */
extern "C" void gt_emu_switch_asm(void **save, void *load);
__asm__(".text\n"
        ".globl gt_emu_switch_asm\n"
        ".hidden gt_emu_switch_asm\n"
        ".type gt_emu_switch_asm,@function\n"
        "gt_emu_switch_asm:\n"
        "\tpushq %rbp\n\tpushq %rbx\n\tpushq %r12\n\tpushq %r13\n\tpushq %r14\n\tpushq %r15\n"
        "\tmovq %rsp, (%rdi)\n"
        "\tmovq %rsi, %rsp\n"
        "\tpopq %r15\n\tpopq %r14\n\tpopq %r13\n\tpopq %r12\n\tpopq %rbx\n\tpopq %rbp\n"
        "\tret\n"
        ".size gt_emu_switch_asm, .-gt_emu_switch_asm\n");
static inline void gt_emu_swap(gt_emu_context *save, gt_emu_context *load) { gt_emu_switch_asm(&save->sp, load->sp); }
#else
struct gt_emu_context {
	ucontext_t uc;
};
static inline void gt_emu_swap(gt_emu_context *save, gt_emu_context *load) { swapcontext(&save->uc, &load->uc); }
#endif

struct gt_emu_warp {
	int live;               /* lanes not yet exited */
	int arrived;            /* lanes waiting at the warp barrier */
	unsigned long long gen; /* completed warp barriers */
	unsigned long long slot[32];
	int present[32]; /* lanes that stored into slot this round */
};

struct gt_emu_fiber {
	gt_emu_context ctx;
	gt_emu_uint3 tid;
	int linear, warp, lane;
	int state; /* 0 not started, 1 runnable, 2 waiting, 3 done */
	int wait_warp; /* waiting at: 0 the block barrier, 1 the warp barrier */
	unsigned long long wait_gen;
	char *stack;
};

struct gt_emu_state {
	gt_emu_uint3 grid, block, bidx;
	gt_emu_fiber *fibers;
	int nthreads, cap;
	gt_emu_warp *warps;
	int nwarps, warp_cap;
	int block_live, block_arrived;
	const char *sync_file; /* where the first waiting thread called __syncthreads */
	int sync_line;
	unsigned long long block_gen;
	gt_emu_context sched;
	gt_emu_fiber *cur;
	void (*thunk)(void **);
	void **params;
	int failed;
	char err[512];
};

static thread_local gt_emu_state gt_emu_st;

#define threadIdx (gt_emu_st.cur->tid)
#define blockIdx (gt_emu_st.bidx)
#define blockDim (gt_emu_st.block)
#define gridDim (gt_emu_st.grid)
#define warpSize 32

static void gt_emu_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void gt_emu_fail(const char *fmt, ...) {
	if (gt_emu_st.failed) {
		return;
	}
	gt_emu_st.failed = 1;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(gt_emu_st.err, sizeof gt_emu_st.err, fmt, ap);
	va_end(ap);
}

/* __syncthreads records where it was called: threads of one block meeting
 * at different __syncthreads calls is divergent code, undefined on a GPU
 * and a failed launch here. */
#define __syncthreads() gt_emu_syncthreads(__FILE__, __LINE__)

static inline void gt_emu_syncthreads(const char *file, int line) {
	gt_emu_state &s = gt_emu_st;
	gt_emu_fiber *f = s.cur;
	if (s.block_arrived == 0) {
		s.sync_file = file;
		s.sync_line = line;
	} else if (s.sync_line != line || strcmp(s.sync_file, file) != 0) {
		gt_emu_fail("block (%u,%u,%u): thread %d reaches __syncthreads at %s:%d while others wait at %s:%d",
		            s.bidx.x, s.bidx.y, s.bidx.z, f->linear, file, line, s.sync_file, s.sync_line);
	}
	s.block_arrived++;
	if (s.block_arrived == s.block_live) {
		s.block_gen++;
		s.block_arrived = 0;
		return;
	}
	f->state = 2;
	f->wait_warp = 0;
	f->wait_gen = s.block_gen;
	gt_emu_swap(&f->ctx, &s.sched);
}

static inline void gt_emu_warp_barrier(void) {
	gt_emu_state &s = gt_emu_st;
	gt_emu_fiber *f = s.cur;
	gt_emu_warp *w = &s.warps[f->warp];
	w->arrived++;
	if (w->arrived == w->live) {
		w->gen++;
		w->arrived = 0;
		return;
	}
	f->state = 2;
	f->wait_warp = 1;
	f->wait_gen = w->gen;
	gt_emu_swap(&f->ctx, &s.sched);
}

static inline void __syncwarp(unsigned mask = 0xffffffffu) {
	(void)mask;
	gt_emu_warp_barrier();
}

/* gt_emu_exchange publishes v for the lanes of this warp and returns the
 * value lane src published in the same round. */
template <typename T> static inline T gt_emu_exchange(T v, int src) {
	static_assert(sizeof(T) <= 8, "shuffles move at most 8 bytes");
	gt_emu_state &s = gt_emu_st;
	gt_emu_fiber *f = s.cur;
	gt_emu_warp *w = &s.warps[f->warp];
	unsigned long long bits = 0;
	memcpy(&bits, &v, sizeof(T));
	w->slot[f->lane] = bits;
	w->present[f->lane] = 1;
	gt_emu_warp_barrier();
	T r = v;
	if (src < 0 || src >= 32 || !w->present[src]) {
		gt_emu_fail("shuffle in block (%u,%u,%u): lane %d of warp %d reads lane %d, which is not taking part "
		            "(exited, or beyond the block)",
		            s.bidx.x, s.bidx.y, s.bidx.z, f->lane, f->warp, src);
	} else {
		memcpy(&r, &w->slot[src], sizeof(T));
	}
	gt_emu_warp_barrier();
	w->present[f->lane] = 0;
	return r;
}

static inline int gt_emu_lane(void) { return gt_emu_st.cur->lane; }

template <typename T> static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
	(void)mask;
	int base = gt_emu_lane() / width * width;
	return gt_emu_exchange(v, base + ((src % width) + width) % width);
}

template <typename T> static inline T __shfl_xor_sync(unsigned mask, T v, int m, int width = 32) {
	(void)mask;
	int lane = gt_emu_lane();
	int src = lane ^ m;
	if (src / width != lane / width) {
		src = lane;
	}
	return gt_emu_exchange(v, src);
}

template <typename T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32) {
	(void)mask;
	int lane = gt_emu_lane();
	int src = lane + (int)d;
	if (src / width != lane / width) {
		src = lane;
	}
	return gt_emu_exchange(v, src);
}

template <typename T> static inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32) {
	(void)mask;
	int lane = gt_emu_lane();
	int src = lane - (int)d;
	if (src < lane / width * width) {
		src = lane;
	}
	return gt_emu_exchange(v, src);
}

static inline unsigned __ballot_sync(unsigned mask, int pred) {
	(void)mask;
	gt_emu_state &s = gt_emu_st;
	gt_emu_fiber *f = s.cur;
	gt_emu_warp *w = &s.warps[f->warp];
	w->slot[f->lane] = pred != 0;
	w->present[f->lane] = 1;
	gt_emu_warp_barrier();
	unsigned r = 0;
	for (int i = 0; i < 32; i++) {
		if (w->present[i] && w->slot[i]) {
			r |= 1u << i;
		}
	}
	gt_emu_warp_barrier();
	w->present[f->lane] = 0;
	return r;
}

static inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }

/* Every live lane votes; all is "no live lane voted false". */
static inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, !pred) == 0; }

/* ---- bit casts and math ---- */

static inline unsigned int __float_as_uint(float f) {
	unsigned int u;
	memcpy(&u, &f, 4);
	return u;
}
static inline float __uint_as_float(unsigned int u) {
	float f;
	memcpy(&f, &u, 4);
	return f;
}
static inline int __float_as_int(float f) {
	int u;
	memcpy(&u, &f, 4);
	return u;
}
static inline float __int_as_float(int u) {
	float f;
	memcpy(&f, &u, 4);
	return f;
}
static inline long long __double_as_longlong(double d) {
	long long u;
	memcpy(&u, &d, 8);
	return u;
}
static inline double __longlong_as_double(long long u) {
	double d;
	memcpy(&d, &u, 8);
	return d;
}
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
/* glibc declares __expf and __logf itself; the CUDA fast versions map to
 * the accurate ones here. */
#define __expf(x) expf(x)
#define __logf(x) logf(x)
static inline float __fdividef(float a, float b) { return a / b; }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }

static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned int min(unsigned int a, unsigned int b) { return a < b ? a : b; }
static inline unsigned int max(unsigned int a, unsigned int b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline float min(float a, float b) { return fminf(a, b); }
static inline float max(float a, float b) { return fmaxf(a, b); }

/* ---- atomics: return the old value, as CUDA's do ---- */

static inline float atomicAdd(float *p, float v) {
	float old = *p;
	*p = old + v;
	return old;
}
static inline double atomicAdd(double *p, double v) {
	double old = *p;
	*p = old + v;
	return old;
}
static inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static inline unsigned int atomicAdd(unsigned int *p, unsigned int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) {
	return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
static inline int atomicMax(int *p, int v) {
	int old = *p;
	if (v > old) {
		*p = v;
	}
	return old;
}
static inline int atomicOr(int *p, int v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
static inline unsigned int atomicOr(unsigned int *p, unsigned int v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
template <typename T> static inline T gt_emu_cas(T *p, T cmp, T v) {
	T old = *p;
	if (old == cmp) {
		*p = v;
	}
	return old;
}
static inline int atomicCAS(int *p, int cmp, int v) { return gt_emu_cas(p, cmp, v); }
static inline unsigned int atomicCAS(unsigned int *p, unsigned int cmp, unsigned int v) { return gt_emu_cas(p, cmp, v); }
static inline unsigned long long atomicCAS(unsigned long long *p, unsigned long long cmp, unsigned long long v) {
	return gt_emu_cas(p, cmp, v);
}

/* ---- runtime ---- */

#define GT_EMU_STACK (128 * 1024)
#define GT_EMU_PAGE 4096

/* gt_emu_fiber_main runs one CUDA thread, then hands control back to the
 * scheduler for good. */
extern "C" void gt_emu_fiber_main(void) {
	gt_emu_state &s = gt_emu_st;
	s.thunk(s.params);
	s.cur->state = 3;
	gt_emu_swap(&s.cur->ctx, &s.sched); /* never resumed */
	abort();
}

/* gt_emu_start prepares f to begin in gt_emu_fiber_main on its stack. */
static void gt_emu_start(gt_emu_fiber *f) {
#if defined(__x86_64__) && !defined(GT_EMU_UCONTEXT)
	/* The switch pops six registers, then returns into gt_emu_fiber_main:
	 * after that ret the stack pointer must be 8 mod 16, as after a call. */
	uintptr_t top = ((uintptr_t)(f->stack + GT_EMU_STACK)) & ~(uintptr_t)15;
	void **sp = (void **)(top - 8);
	*--sp = (void *)gt_emu_fiber_main; /* return address */
	for (int i = 0; i < 6; i++) {
		*--sp = NULL; /* r15 r14 r13 r12 rbx rbp */
	}
	f->ctx.sp = sp;
#else
	getcontext(&f->ctx.uc);
	f->ctx.uc.uc_stack.ss_sp = f->stack;
	f->ctx.uc.uc_stack.ss_size = GT_EMU_STACK;
	f->ctx.uc.uc_link = NULL;
	makecontext(&f->ctx.uc, gt_emu_fiber_main, 0);
#endif
}

/* gt_emu_reserve makes room for n fibers, each stack with a guard page
 * below it so an overflow faults instead of corrupting a neighbour. */
static int gt_emu_reserve(int n) {
	gt_emu_state &s = gt_emu_st;
	if (n <= s.cap) {
		return 0;
	}
	gt_emu_fiber *f = (gt_emu_fiber *)realloc(s.fibers, sizeof(gt_emu_fiber) * (size_t)n);
	if (f == NULL) {
		return -1;
	}
	s.fibers = f;
	for (int i = s.cap; i < n; i++) {
		char *m = (char *)mmap(NULL, GT_EMU_STACK + GT_EMU_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		                       -1, 0);
		if (m == MAP_FAILED) {
			s.cap = i;
			return -1;
		}
		mprotect(m, GT_EMU_PAGE, PROT_NONE);
		s.fibers[i].stack = m + GT_EMU_PAGE;
	}
	s.cap = n;
	return 0;
}

static int gt_emu_reserve_warps(int n) {
	gt_emu_state &s = gt_emu_st;
	if (n <= s.warp_cap) {
		return 0;
	}
	gt_emu_warp *w = (gt_emu_warp *)realloc(s.warps, sizeof(gt_emu_warp) * (size_t)n);
	if (w == NULL) {
		return -1;
	}
	s.warps = w;
	s.warp_cap = n;
	return 0;
}

static void gt_emu_thread_done(gt_emu_fiber *f) {
	gt_emu_state &s = gt_emu_st;
	s.block_live--;
	if (s.block_arrived > 0 && s.block_arrived == s.block_live) {
		s.block_gen++;
		s.block_arrived = 0;
	}
	gt_emu_warp *w = &s.warps[f->warp];
	w->live--;
	if (w->arrived > 0 && w->arrived == w->live) {
		w->gen++;
		w->arrived = 0;
	}
}

/* ---- schedules ----
 * A GPU promises no order between the blocks of a grid, nor between the
 * threads of a block between two barriers. The default schedule runs both
 * in index order; the others run them reversed or in a seeded pseudo-random
 * order (a fresh permutation of the threads for every pass between
 * barriers). A kernel whose results change with the schedule depends on an
 * order the hardware does not give: a missing barrier, a race on shared or
 * global memory. The schedule is per OS thread (each mock device launches
 * on its own), set with gt_emu_set_schedule. */
enum { GT_EMU_FORWARD = 0, GT_EMU_REVERSE = 1, GT_EMU_SHUFFLE = 2, GT_EMU_INTERLEAVE = 3 };
static thread_local int gt_emu_mode;
static thread_local int gt_emu_fine; /* switch threads at every GT_EMU_POINT */
static thread_local unsigned long long gt_emu_rng;

/* GT_EMU_INTERLEAVE is GT_EMU_SHUFFLE that also switches to another thread
 * at every global-memory access of the prelude (gt_load, gt_store), so two
 * threads' accesses between the same barriers interleave too. */
extern "C" __attribute__((visibility("default"))) void gt_emu_set_schedule(int mode, unsigned long long seed) {
	gt_emu_fine = mode == GT_EMU_INTERLEAVE;
	gt_emu_mode = gt_emu_fine ? GT_EMU_SHUFFLE : mode;
	gt_emu_rng = seed * 0x9e3779b97f4a7c15ull + 1;
}

/* gt_emu_point lets the scheduler run other threads before this one goes
 * on (interleaving schedule only). */
static inline void gt_emu_point(void) {
	if (gt_emu_fine) {
		gt_emu_swap(&gt_emu_st.cur->ctx, &gt_emu_st.sched);
	}
}
#define GT_EMU_POINT() gt_emu_point()

static unsigned long long gt_emu_next(void) {
	gt_emu_rng = gt_emu_rng * 6364136223846793005ull + 1442695040888963407ull;
	return gt_emu_rng >> 17;
}

static unsigned long long gt_emu_gcd(unsigned long long a, unsigned long long b) {
	while (b) {
		unsigned long long t = a % b;
		a = b;
		b = t;
	}
	return a;
}

/* gt_emu_order is a permutation of [0, n): i ↦ (a·i + b) mod n with a
 * coprime to n, drawn afresh by gt_emu_order_new. */
struct gt_emu_order {
	unsigned long long n, a, b;
	int mode;
};

static gt_emu_order gt_emu_order_new(unsigned long long n) {
	gt_emu_order o = {n, 1, 0, gt_emu_mode};
	if (o.mode == GT_EMU_SHUFFLE && n > 1) {
		o.a = 1 + gt_emu_next() % (n - 1);
		while (gt_emu_gcd(o.a, n) != 1) {
			o.a = o.a % (n - 1) + 1;
		}
		o.b = gt_emu_next() % n;
	}
	return o;
}

static inline unsigned long long gt_emu_at(const gt_emu_order *o, unsigned long long i) {
	if (o->mode == GT_EMU_REVERSE) {
		return o->n - 1 - i;
	}
	if (o->mode == GT_EMU_SHUFFLE) {
		return (o->a * i + o->b) % o->n;
	}
	return i;
}

/* gt_emu_run_block runs every thread of block s.bidx to completion. */
static int gt_emu_run_block(void) {
	gt_emu_state &s = gt_emu_st;
	int n = s.nthreads;
	s.block_live = n;
	s.block_arrived = 0;
	for (int w = 0; w < s.nwarps; w++) {
		gt_emu_warp *wp = &s.warps[w];
		wp->live = (w == s.nwarps - 1) ? n - 32 * w : 32;
		wp->arrived = 0;
		memset(wp->present, 0, sizeof wp->present);
	}
	for (int i = 0; i < n; i++) {
		gt_emu_fiber *f = &s.fibers[i];
		f->linear = i;
		f->tid.x = (unsigned)i % s.block.x;
		f->tid.y = (unsigned)i / s.block.x % s.block.y;
		f->tid.z = (unsigned)i / (s.block.x * s.block.y);
		f->warp = i / 32;
		f->lane = i % 32;
		f->state = 0;
		gt_emu_start(f);
	}
	int done = 0;
	while (done < n) {
		int progress = 0;
		gt_emu_order order = gt_emu_order_new((unsigned long long)n);
		for (int k = 0; k < n; k++) {
			gt_emu_fiber *f = &s.fibers[gt_emu_at(&order, (unsigned long long)k)];
			if (f->state == 3) {
				continue;
			}
			if (f->state == 2) {
				unsigned long long gen = f->wait_warp ? s.warps[f->warp].gen : s.block_gen;
				if (gen == f->wait_gen) {
					continue;
				}
			}
			f->state = 1;
			s.cur = f;
			gt_emu_swap(&s.sched, &f->ctx);
			progress = 1;
			if (f->state == 3) {
				done++;
				gt_emu_thread_done(f);
			}
		}
		if (!progress) {
			int at_block = 0, at_warp = 0, first_block = -1, first_warp = -1;
			for (int i = 0; i < n; i++) {
				gt_emu_fiber *f = &s.fibers[i];
				if (f->state != 2) {
					continue;
				}
				if (f->wait_warp) {
					at_warp++;
					if (first_warp < 0) {
						first_warp = i;
					}
				} else {
					at_block++;
					if (first_block < 0) {
						first_block = i;
					}
				}
			}
			gt_emu_fail("deadlock in block (%u,%u,%u): %d threads wait at __syncthreads (first: thread %d), "
			            "%d at a warp barrier, shuffle or vote (first: thread %d), %d have exited",
			            s.bidx.x, s.bidx.y, s.bidx.z, at_block, first_block, at_warp, first_warp, done);
			return -1;
		}
	}
	return s.failed ? -1 : 0;
}

typedef struct gt_emu_entry {
	const char *name;
	void (*thunk)(void **);
} gt_emu_entry;

template <typename... A, size_t... I>
static inline void gt_emu_call(void (*k)(A...), void **p, std::index_sequence<I...>) {
	k(*static_cast<typename std::remove_cv<A>::type *>(p[I])...);
	(void)p;
}

template <typename... A> static inline void gt_emu_invoke(void (*k)(A...), void **p) {
	gt_emu_call(k, p, std::index_sequence_for<A...>{});
}

#define GT_EMU_TABLE_BEGIN static const gt_emu_entry gt_emu_table[] = {
#define GT_EMU_KERNEL(name) {#name, [](void **p) { gt_emu_invoke(name, p); }},
#define GT_EMU_TABLE_END                                                                                              \
	}                                                                                                                 \
	;                                                                                                                 \
	static unsigned long long gt_emu_counts[sizeof gt_emu_table / sizeof gt_emu_table[0]];                            \
	extern "C" __attribute__((visibility("default"))) int gt_emu_kernel_count(void) {                                \
		return (int)(sizeof gt_emu_table / sizeof gt_emu_table[0]);                                                   \
	}                                                                                                                 \
	extern "C" __attribute__((visibility("default"))) const char *gt_emu_kernel_name(int i) {                        \
		return i >= 0 && i < gt_emu_kernel_count() ? gt_emu_table[i].name : NULL;                                     \
	}                                                                                                                 \
	extern "C" __attribute__((visibility("default"))) int gt_emu_find(const char *name) {                            \
		for (int i = 0; i < gt_emu_kernel_count(); i++) {                                                             \
			if (strcmp(gt_emu_table[i].name, name) == 0) {                                                            \
				return i;                                                                                             \
			}                                                                                                         \
		}                                                                                                             \
		return -1;                                                                                                    \
	}                                                                                                                 \
	extern "C" __attribute__((visibility("default"))) unsigned long long gt_emu_launches(int i) {                    \
		return i >= 0 && i < gt_emu_kernel_count() ? __atomic_load_n(&gt_emu_counts[i], __ATOMIC_SEQ_CST) : 0;       \
	}                                                                                                                 \
	extern "C" __attribute__((visibility("default"))) int gt_emu_launch(int id, unsigned gx, unsigned gy, unsigned gz, \
	                                                                    unsigned bx, unsigned by, unsigned bz,         \
	                                                                    void **params, char *err, int errlen) {        \
		return gt_emu_run(id < 0 || id >= gt_emu_kernel_count() ? NULL : &gt_emu_table[id],                          \
		                  id >= 0 && id < gt_emu_kernel_count() ? &gt_emu_counts[id] : NULL, gx, gy, gz, bx, by, bz,  \
		                  params, err, errlen);                                                                       \
	}

/* gt_emu_run executes one launch of entry e; on failure it writes a message
 * to err and returns -1. */
static int gt_emu_run(const gt_emu_entry *e, unsigned long long *count, unsigned gx, unsigned gy, unsigned gz,
                      unsigned bx, unsigned by, unsigned bz, void **params, char *err, int errlen) {
	gt_emu_state &s = gt_emu_st;
	if (e == NULL) {
		snprintf(err, (size_t)errlen, "emulation: no such kernel");
		return -1;
	}
	unsigned long long threads = (unsigned long long)bx * by * bz;
	if (threads == 0 || threads > 1024 || gx == 0 || gy == 0 || gz == 0) {
		snprintf(err, (size_t)errlen, "emulation: %s: bad launch geometry grid %ux%ux%u block %ux%ux%u", e->name, gx,
		         gy, gz, bx, by, bz);
		return -1;
	}
	int n = (int)threads;
	int nw = (n + 31) / 32;
	if (gt_emu_reserve(n) != 0 || gt_emu_reserve_warps(nw) != 0) {
		snprintf(err, (size_t)errlen, "emulation: %s: out of memory for %d fiber stacks", e->name, n);
		return -1;
	}
	__atomic_fetch_add(count, 1ull, __ATOMIC_SEQ_CST);
	s.grid = {gx, gy, gz};
	s.block = {bx, by, bz};
	s.nthreads = n;
	s.nwarps = nw;
	s.thunk = e->thunk;
	s.params = params;
	s.failed = 0;
	s.err[0] = 0;
	unsigned long long blocks = (unsigned long long)gx * gy * gz;
	gt_emu_order order = gt_emu_order_new(blocks);
	for (unsigned long long k = 0; k < blocks; k++) {
		unsigned long long id = gt_emu_at(&order, k);
		s.bidx = {(unsigned)(id % gx), (unsigned)(id / gx % gy), (unsigned)(id / ((unsigned long long)gx * gy))};
		if (gt_emu_run_block() != 0) {
			snprintf(err, (size_t)errlen, "emulation: %s (grid %ux%ux%u, block %ux%ux%u): %s", e->name, gx, gy, gz, bx,
			         by, bz, s.err);
			return -1;
		}
	}
	return 0;
}

#endif /* GT_EMU_H */
