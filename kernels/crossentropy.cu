// crossentropy.cu: softmax cross-entropy over the first V of Vp columns.
// N = rows, V = real classes, Vp = V padded; logits and dlogits (N,Vp) in
// any float dtype, probs (N,Vp) and losses (N) F32, targets (N) int.
// One block of GT_CE_THREADS threads owns a row (grid-stride over rows),
// so no output element is written by two threads and every sum has a
// fixed order.
//
// A target outside [0, V) cannot be reported from a kernel, so the row's
// loss (forward) or real-column gradients (backward) become NaN, which
// the trainer's non-finite checks catch, rather than a silent read out of
// bounds.

#define GT_CE_THREADS 256
#define GT_CE_NAN __int_as_float(0x7fc00000)

// gt_ce_merge folds the softmax state (m2, s2) into (m, s): m is a running
// max and s = Σ e^(x−m) over the elements seen. An empty state is
// (−Inf, 0); merging two empty states must not make NaN of −Inf − (−Inf).
__device__ __forceinline__ void gt_ce_merge(float &m, float &s, float m2, float s2) {
	float mm = fmaxf(m, m2);
	if (mm == GT_NEG_INF) {
		return;
	}
	s = s * expf(m - mm) + s2 * expf(m2 - mm);
	m = mm;
}

// gt_ce_block_softmax_state merges every thread's (m, s) in a fixed order:
// warp 0 folds the threads lane, lane+32, ... in turn, then the lanes by
// shuffles. Every thread of the block must call it and gets the result.
// Two barriers per row instead of a shuffle tree in every warp.
__device__ __forceinline__ void gt_ce_block_softmax_state(float &m, float &s) {
	__shared__ float bm[GT_CE_THREADS];
	__shared__ float bs[GT_CE_THREADS];
	__shared__ float res[2];
	bm[threadIdx.x] = m;
	bs[threadIdx.x] = s;
	__syncthreads();
	if (threadIdx.x < GT_WARP) {
		float wm = bm[threadIdx.x];
		float ws = bs[threadIdx.x];
		for (int i = threadIdx.x + GT_WARP; i < blockDim.x; i += GT_WARP) {
			gt_ce_merge(wm, ws, bm[i], bs[i]);
		}
		for (int k = GT_WARP / 2; k > 0; k >>= 1) {
			float om = __shfl_xor_sync(GT_FULL_MASK, wm, k);
			float os = __shfl_xor_sync(GT_FULL_MASK, ws, k);
			gt_ce_merge(wm, ws, om, os);
		}
		if (threadIdx.x == 0) {
			res[0] = wm;
			res[1] = ws;
		}
	}
	__syncthreads();
	m = res[0];
	s = res[1];
}

// gt_crossentropy_forward: probs = softmax(logits[:, :V]), padded columns
// 0, losses = log Σe^(x−max) + max − x[target], which keeps full precision
// when probs[target] underflows. The max and the sum come from one online
// pass over the logits (the sum rescaled whenever the max grows), so a row
// is read twice: once for the statistics, once to write probs.
extern "C" __global__ void gt_crossentropy_forward(float *losses, float *probs, const void *logits, int logits_dt, const int *targets, int N, int V, int Vp) {
	for (long long r = blockIdx.x; r < N; r += gridDim.x) {
		long long off = r * Vp;
		float m = GT_NEG_INF;
		float s = 0.0f;
		for (int j = threadIdx.x; j < V; j += blockDim.x) {
			gt_ce_merge(m, s, gt_load(logits, logits_dt, off + j), 1.0f);
		}
		gt_ce_block_softmax_state(m, s);
		float inv = 1.0f / s;
		float *p = probs + off;
		for (int j = threadIdx.x; j < Vp; j += blockDim.x) {
			p[j] = j < V ? expf(gt_load(logits, logits_dt, off + j) - m) * inv : 0.0f;
		}
		if (threadIdx.x == 0) {
			int tg = targets[r];
			losses[r] = tg >= 0 && tg < V ? logf(s) + m - gt_load(logits, logits_dt, off + tg) : GT_CE_NAN;
		}
	}
}

// gt_crossentropy_backward: dlogits = (probs − onehot(target))·dloss over
// the real columns, 0 in the padded ones. Each element of probs is read by
// the thread that then writes the same element of dlogits, so dlogits may
// be probs itself (same F32 storage, in place).
extern "C" __global__ void gt_crossentropy_backward(void *dlogits, int dlogits_dt, const float *probs, const int *targets, float dloss, int N, int V, int Vp) {
	for (long long r = blockIdx.x; r < N; r += gridDim.x) {
		long long off = r * Vp;
		int tg = targets[r];
		bool ok = tg >= 0 && tg < V;
		for (int j = threadIdx.x; j < Vp; j += blockDim.x) {
			float d = 0.0f;
			if (j < V) {
				d = ok ? probs[off + j] * dloss : GT_CE_NAN;
				if (j == tg) {
					d -= dloss;
				}
			}
			gt_store(dlogits, dlogits_dt, off + j, d);
		}
	}
}

// gt_fused_classifier is llm.c's fused_classifier: one block per row, one
// online pass for the softmax statistics, the loss, then (write_dlogits)
// dlogits = (softmax − onehot(target))·dloss over the logits themselves,
// in their own dtype, padded columns 0. No (N,Vp) probabilities exist.
// The loss reads logits[target] before the barrier that precedes the
// writes, and each later element is read by the thread that overwrites
// it, so the in-place update is safe.
extern "C" __global__ void gt_fused_classifier(float *losses, void *logits, int logits_dt, const int *targets, float dloss, int write_dlogits, int N, int V, int Vp) {
	for (long long r = blockIdx.x; r < N; r += gridDim.x) {
		long long off = r * Vp;
		float m = GT_NEG_INF;
		float s = 0.0f;
		for (int j = threadIdx.x; j < V; j += blockDim.x) {
			gt_ce_merge(m, s, gt_load(logits, logits_dt, off + j), 1.0f);
		}
		gt_ce_block_softmax_state(m, s);
		int tg = targets[r];
		bool ok = tg >= 0 && tg < V;
		if (threadIdx.x == 0) {
			losses[r] = ok ? logf(s) + m - gt_load(logits, logits_dt, off + tg) : GT_CE_NAN;
		}
		if (!write_dlogits) {
			continue;
		}
		__syncthreads();
		float inv = 1.0f / s;
		for (int j = threadIdx.x; j < Vp; j += blockDim.x) {
			float d = 0.0f;
			if (j < V) {
				d = ok ? expf(gt_load(logits, logits_dt, off + j) - m) * inv * dloss : GT_CE_NAN;
				if (j == tg) {
					d -= dloss;
				}
			}
			gt_store(logits, logits_dt, off + j, d);
		}
	}
}
