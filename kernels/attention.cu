// attention.cu: causal self-attention with grouped key/value heads, forward
// and backward, in O(T) memory per head.
// B = batch, T = sequence length, NH = query heads, KV = key/value heads,
// HD = head size, G = NH/KV. qkv (B,T,(NH+2·KV)·HD) holds per token NH query
// heads, then KV key heads, then KV value heads; query head h reads
// key/value head h/G. out and dout are (B,T,NH·HD); lse (B,NH,T) is F32,
// each query row's log-sum-exp of its scaled scores.
//
// No (T,T) matrix exists. Forward runs an online softmax over the keys
// (FlashAttention's recurrence) and keeps out and lse; backward recomputes
// each probability from lse. These are plain per-row kernels, not tiled
// through shared memory or tensor cores: they fix the semantics and the
// memory bound, and keep every sum in a fixed order (bit-identical runs).
// One warp owns a whole row (a query row, or a key row in the key/value
// gradient), so every output element is written by exactly one thread, no
// float atomics are needed, and the only synchronisation is within the
// warp. Blocks hold GT_ATT_WARPS such warps and walk the rows grid-stride,
// so any grid size is correct.
//
// The keys (or queries) of a row are taken 32 at a time, one per lane: a
// lane computes its score with a dot product over HD and leaves its
// weight in the warp's slot of shared memory; after one __syncwarp every
// lane reads all 32 weights (a broadcast read) and adds weight·row into the
// output columns it owns. That is two warp barriers per 32 keys where a
// shuffle per key would be 32 (it also keeps the CPU emulation of the
// tests, which switches fibers at every barrier, fast).

#define GT_ATT_THREADS 128
#define GT_ATT_WARPS (GT_ATT_THREADS / GT_WARP)
// Output columns are covered in chunks of GT_ATT_DCHUNK, each lane keeping
// GT_ATT_DCHUNK/32 sums in registers, so HD is unbounded: a wider head
// walks its row once per chunk, recomputing the scores.
#define GT_ATT_DCHUNK 256
#define GT_ATT_PER_LANE (GT_ATT_DCHUNK / GT_WARP)

// gt_att_dot is the dot product of HD elements at a+aoff and b+boff, by one
// thread in d order.
__device__ __forceinline__ float gt_att_dot(const void *a, int adt, long long aoff, const void *b, int bdt,
                                            long long boff, int HD) {
	float s = 0.0f;
	for (int d = 0; d < HD; d++) {
		s += gt_load(a, adt, aoff + d) * gt_load(b, bdt, boff + d);
	}
	return s;
}

// gt_att_axpy adds w[j] · x[xoff + j·xstride + d0 + d] into acc for the n
// rows j < n of this step; the lane owns columns d0 + lane + 32·r. w is
// the warp's slot of weights, written by lane j before a __syncwarp.
__device__ __forceinline__ void gt_att_axpy(float *acc, const float *w, int n, const void *x, int xdt, long long xoff,
                                            long long xstride, int d0, int HD) {
	int lane = threadIdx.x % GT_WARP;
	for (int j = 0; j < n; j++) {
		float wj = w[j];
		long long base = xoff + (long long)j * xstride + d0;
#pragma unroll
		for (int r = 0; r < GT_ATT_PER_LANE; r++) {
			int d = lane + r * GT_WARP;
			if (d0 + d < HD) {
				acc[r] += wj * gt_load(x, xdt, base + d);
			}
		}
	}
}

// gt_att_store writes a lane's columns of acc·mul to out+ooff.
__device__ __forceinline__ void gt_att_store(const float *acc, float mul, void *out, int odt, long long ooff, int d0,
                                             int HD) {
	int lane = threadIdx.x % GT_WARP;
#pragma unroll
	for (int r = 0; r < GT_ATT_PER_LANE; r++) {
		int d = lane + r * GT_WARP;
		if (d0 + d < HD) {
			gt_store(out, odt, ooff + d0 + d, acc[r] * mul);
		}
	}
}

// gt_att_rowdot is Σ_d a[aoff+d]·b[boff+d] over HD by a whole warp: lanes
// take d = lane, lane+32, …, then a butterfly sum, the same bits on every
// lane.
__device__ __forceinline__ float gt_att_rowdot(const void *a, int adt, long long aoff, const void *b, int bdt,
                                               long long boff, int HD) {
	float s = 0.0f;
	for (int d = threadIdx.x % GT_WARP; d < HD; d += GT_WARP) {
		s += gt_load(a, adt, aoff + d) * gt_load(b, bdt, boff + d);
	}
	return gt_warp_sum(s);
}

// gt_attention_forward: one warp per query row (b,h,t). For each 32 keys
// t2 ≤ t: scores s = scale·q_t·k_t2, the running max m updated, the
// accumulator and each lane's share of the running sum rescaled by
// e^(m_old − m_new), and e^(s − m_new)·v_t2 added. out_t = acc/l and
// lse = m + log l, l being the lanes' shares summed once at the end.
extern "C" __global__ void gt_attention_forward(void *out, int out_dt, float *lse, const void *qkv, int qkv_dt, int B, int T, int NH, int KV, int HD, float scale) {
	__shared__ float wsh[GT_ATT_WARPS][GT_WARP];
	int G = NH / KV;
	long long S = (long long)(NH + 2 * KV) * HD;
	long long rows = (long long)B * NH * T;
	int lane = threadIdx.x % GT_WARP;
	float *w = wsh[threadIdx.x / GT_WARP];
	long long step = (long long)gridDim.x * GT_ATT_WARPS;
	for (long long row = (long long)blockIdx.x * GT_ATT_WARPS + threadIdx.x / GT_WARP; row < rows; row += step) {
		int t = (int)(row % T);
		long long bh = row / T;
		int h = (int)(bh % NH);
		long long b = bh / NH;
		long long base = b * T * S; // token 0 of batch row b
		long long qoff = base + (long long)t * S + (long long)h * HD;
		long long koff = base + (long long)(NH + h / G) * HD;
		long long voff = base + (long long)(NH + KV + h / G) * HD;
		for (int d0 = 0; d0 < HD; d0 += GT_ATT_DCHUNK) {
			float acc[GT_ATT_PER_LANE];
#pragma unroll
			for (int r = 0; r < GT_ATT_PER_LANE; r++) {
				acc[r] = 0.0f;
			}
			float m = GT_NEG_INF, l = 0.0f;
			for (int c0 = 0; c0 <= t; c0 += GT_WARP) {
				int t2 = c0 + lane;
				float s = GT_NEG_INF;
				if (t2 <= t) {
					s = gt_att_dot(qkv, qkv_dt, qoff, qkv, qkv_dt, koff + (long long)t2 * S, HD) * scale;
				}
				float mNew = fmaxf(m, gt_warp_max(s)); // finite: key c0 ≤ t is live
				float p = t2 <= t ? expf(s - mNew) : 0.0f;
				float alpha = expf(m - mNew); // 0 on the first step, m = -inf
				l = l * alpha + p;
#pragma unroll
				for (int r = 0; r < GT_ATT_PER_LANE; r++) {
					acc[r] *= alpha;
				}
				w[lane] = p;
				__syncwarp();
				gt_att_axpy(acc, w, min(GT_WARP, t + 1 - c0), qkv, qkv_dt, voff + (long long)c0 * S, S, d0, HD);
				__syncwarp(); // every lane has read w before the next step writes it
				m = mNew;
			}
			l = gt_warp_sum(l);
			gt_att_store(acc, 1.0f / l, out, out_dt, (b * T + t) * (long long)NH * HD + (long long)h * HD, d0, HD);
			if (d0 == 0 && lane == 0) {
				lse[row] = m + logf(l);
			}
		}
	}
}

// gt_attention_backward_query: one warp per query row (b,h,t). With
// D = dout_t·out_t (saved to dd for gt_attention_backward_kv), for each
// key t2 ≤ t: p = e^(scale·q_t·k_t2 − lse), dp = dout_t·v_t2,
// ds = p·(dp − D)·scale, and dq_t = Σ ds·k_t2 (overwritten).
extern "C" __global__ void gt_attention_backward_query(void *dqkv, int dqkv_dt, float *dd, const void *dout, int dout_dt, const void *out, int out_dt, const void *qkv, int qkv_dt, const float *lse, int B, int T, int NH, int KV, int HD, float scale) {
	__shared__ float wsh[GT_ATT_WARPS][GT_WARP];
	float *w = wsh[threadIdx.x / GT_WARP];
	int G = NH / KV;
	long long S = (long long)(NH + 2 * KV) * HD;
	long long rows = (long long)B * NH * T;
	int lane = threadIdx.x % GT_WARP;
	long long step = (long long)gridDim.x * GT_ATT_WARPS;
	for (long long row = (long long)blockIdx.x * GT_ATT_WARPS + threadIdx.x / GT_WARP; row < rows; row += step) {
		int t = (int)(row % T);
		long long bh = row / T;
		int h = (int)(bh % NH);
		long long b = bh / NH;
		long long base = b * T * S;
		long long qoff = base + (long long)t * S + (long long)h * HD;
		long long koff = base + (long long)(NH + h / G) * HD;
		long long voff = base + (long long)(NH + KV + h / G) * HD;
		long long ooff = (b * T + t) * (long long)NH * HD + (long long)h * HD;
		float D = gt_att_rowdot(dout, dout_dt, ooff, out, out_dt, ooff, HD);
		if (lane == 0) {
			dd[row] = D;
		}
		float L = lse[row];
		for (int d0 = 0; d0 < HD; d0 += GT_ATT_DCHUNK) {
			float acc[GT_ATT_PER_LANE];
#pragma unroll
			for (int r = 0; r < GT_ATT_PER_LANE; r++) {
				acc[r] = 0.0f;
			}
			for (int c0 = 0; c0 <= t; c0 += GT_WARP) {
				int t2 = c0 + lane;
				float ds = 0.0f;
				if (t2 <= t) {
					float p = expf(gt_att_dot(qkv, qkv_dt, qoff, qkv, qkv_dt, koff + (long long)t2 * S, HD) * scale - L);
					float dp = gt_att_dot(dout, dout_dt, ooff, qkv, qkv_dt, voff + (long long)t2 * S, HD);
					ds = p * (dp - D) * scale;
				}
				w[lane] = ds;
				__syncwarp();
				gt_att_axpy(acc, w, min(GT_WARP, t + 1 - c0), qkv, qkv_dt, koff + (long long)c0 * S, S, d0, HD);
				__syncwarp();
			}
			gt_att_store(acc, 1.0f, dqkv, dqkv_dt, qoff, d0, HD);
		}
	}
}

// gt_attention_backward_kv: one warp per key row (b,g,t2) of key/value
// head g, after gt_attention_backward_query has written dd (each query
// row's D). Only queries t ≥ t2 saw key t2; over the G query heads h of the
// group, in h then t order: p = e^(scale·q_t·k_t2 − lse_t),
// ds = p·(dout_t·v_t2 − D_t)·scale, dv_t2 = Σ p·dout_t and
// dk_t2 = Σ ds·q_t (both overwritten).
extern "C" __global__ void gt_attention_backward_kv(void *dqkv, int dqkv_dt, const float *dd, const void *dout, int dout_dt, const void *qkv, int qkv_dt, const float *lse, int B, int T, int NH, int KV, int HD, float scale) {
	__shared__ float wsh[GT_ATT_WARPS][2][GT_WARP];
	float *wp = wsh[threadIdx.x / GT_WARP][0], *wds = wsh[threadIdx.x / GT_WARP][1];
	int G = NH / KV;
	long long S = (long long)(NH + 2 * KV) * HD;
	long long rows = (long long)B * KV * T;
	int lane = threadIdx.x % GT_WARP;
	long long step = (long long)gridDim.x * GT_ATT_WARPS;
	for (long long row = (long long)blockIdx.x * GT_ATT_WARPS + threadIdx.x / GT_WARP; row < rows; row += step) {
		int t2 = (int)(row % T);
		long long bg = row / T;
		int g = (int)(bg % KV);
		long long b = bg / KV;
		long long base = b * T * S;
		long long koff = base + (long long)t2 * S + (long long)(NH + g) * HD;
		long long voff = base + (long long)t2 * S + (long long)(NH + KV + g) * HD;
		for (int d0 = 0; d0 < HD; d0 += GT_ATT_DCHUNK) {
			float dk[GT_ATT_PER_LANE], dv[GT_ATT_PER_LANE];
#pragma unroll
			for (int r = 0; r < GT_ATT_PER_LANE; r++) {
				dk[r] = 0.0f;
				dv[r] = 0.0f;
			}
			for (int i = 0; i < G; i++) {
				int h = g * G + i;
				long long qoff = base + (long long)h * HD;               // token 0's query head h
				long long ooff = b * T * (long long)NH * HD + (long long)h * HD; // token 0's dout head h
				long long srow = (b * NH + h) * (long long)T;            // token 0's lse and D
				for (int c0 = t2; c0 < T; c0 += GT_WARP) {
					int t = c0 + lane;
					float p = 0.0f, ds = 0.0f;
					if (t < T) {
						p = expf(gt_att_dot(qkv, qkv_dt, qoff + (long long)t * S, qkv, qkv_dt, koff, HD) * scale -
						         lse[srow + t]);
						float dp = gt_att_dot(dout, dout_dt, ooff + (long long)t * NH * HD, qkv, qkv_dt, voff, HD);
						ds = p * (dp - dd[srow + t]) * scale;
					}
					int n = min(GT_WARP, T - c0);
					wp[lane] = p;
					wds[lane] = ds;
					__syncwarp();
					gt_att_axpy(dv, wp, n, dout, dout_dt, ooff + (long long)c0 * NH * HD, (long long)NH * HD, d0, HD);
					gt_att_axpy(dk, wds, n, qkv, qkv_dt, qoff + (long long)c0 * S, S, d0, HD);
					__syncwarp();
				}
			}
			gt_att_store(dk, 1.0f, dqkv, dqkv_dt, koff, d0, HD);
			gt_att_store(dv, 1.0f, dqkv, dqkv_dt, voff, d0, HD);
		}
	}
}
