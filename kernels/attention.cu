// attention.cu: causal multi-head self-attention, forward and backward.
// B = batch, T = sequence length, C = channels, NH = heads, HS = C/NH.
// qkv (B,T,3C) holds q, k and v side by side; att and datt (B,NH,T,T) are
// F32 and zero above the diagonal.
//
// These are our own kernels rather than cuBLAS strided-batched GEMMs around
// a softmax kernel: no GPU was available to measure the two against each
// other, and own kernels keep every sum in a fixed order (bit-identical
// runs) and skip the masked half of every score matrix. One warp owns a
// whole row (a query row, or a key row in the key/value gradient), so every
// output element is written by exactly one thread, no float atomics are
// needed, and the only synchronisation is within the warp. Blocks hold
// GT_ATT_WARPS such warps and walk the rows grid-stride, so any grid size
// is correct.

#define GT_ATT_THREADS 128
#define GT_ATT_WARPS (GT_ATT_THREADS / GT_WARP)
// Weighted row sums cover HS in chunks of GT_ATT_DCHUNK columns, each lane
// keeping GT_ATT_DCHUNK/32 sums in registers, so HS is unbounded.
#define GT_ATT_DCHUNK 256
#define GT_ATT_PER_LANE (GT_ATT_DCHUNK / GT_WARP)

// gt_att_dot is the dot product of HS elements at a+aoff and b+boff, by one
// thread in d order.
__device__ __forceinline__ float gt_att_dot(const void *a, int adt, long long aoff, const void *b, int bdt,
                                            long long boff, int HS) {
	float s = 0.0f;
	for (int d = 0; d < HS; d++) {
		s += gt_load(a, adt, aoff + d) * gt_load(b, bdt, boff + d);
	}
	return s;
}

// gt_att_wsum stores out[ooff+d] = Σ_{j0≤j<j1} w[j·wstride] · x[xoff+j·xstride+d]
// for d < HS, summed in j order. It is called by a whole warp: lanes take
// the columns d (coalesced rows of x) and every lane reads the same weight.
__device__ __forceinline__ void gt_att_wsum(const float *w, long long wstride, int j0, int j1, const void *x, int xdt,
                                            long long xoff, long long xstride, int HS, void *out, int odt,
                                            long long ooff) {
	int lane = threadIdx.x % GT_WARP;
	for (int d0 = 0; d0 < HS; d0 += GT_ATT_DCHUNK) {
		float acc[GT_ATT_PER_LANE];
#pragma unroll
		for (int r = 0; r < GT_ATT_PER_LANE; r++) {
			acc[r] = 0.0f;
		}
		for (int j = j0; j < j1; j++) {
			float wj = w[(long long)j * wstride];
			long long base = xoff + (long long)j * xstride + d0;
#pragma unroll
			for (int r = 0; r < GT_ATT_PER_LANE; r++) {
				int d = lane + r * GT_WARP;
				if (d0 + d < HS) {
					acc[r] += wj * gt_load(x, xdt, base + d);
				}
			}
		}
#pragma unroll
		for (int r = 0; r < GT_ATT_PER_LANE; r++) {
			int d = lane + r * GT_WARP;
			if (d0 + d < HS) {
				gt_store(out, odt, ooff + d0 + d, acc[r]);
			}
		}
	}
}

// gt_attention_forward: one warp per query row (b,h,t). Lanes take the keys
// t2 ≤ t: scores scale·q_t·k_t2 go straight into the att row, which is
// turned into softmax probabilities in place (max subtracted first, the
// masked future zeroed); then out_t = Σ att[t2]·v_t2 with lanes across HS.
extern "C" __global__ void gt_attention_forward(void *out, int out_dt, float *att, const void *qkv, int qkv_dt, int B, int T, int C, int NH, float scale) {
	int HS = C / NH;
	long long C3 = 3LL * C;
	long long rows = (long long)B * NH * T;
	int lane = threadIdx.x % GT_WARP;
	long long step = (long long)gridDim.x * GT_ATT_WARPS;
	for (long long row = (long long)blockIdx.x * GT_ATT_WARPS + threadIdx.x / GT_WARP; row < rows; row += step) {
		int t = (int)(row % T);
		long long bh = row / T;
		int h = (int)(bh % NH);
		long long b = bh / NH;
		long long base = b * T * C3 + (long long)h * HS; // q of (b, t=0, h)
		long long qoff = base + (long long)t * C3;
		float *arow = att + row * T;

		float m = GT_NEG_INF;
		for (int t2 = lane; t2 <= t; t2 += GT_WARP) {
			float s = gt_att_dot(qkv, qkv_dt, qoff, qkv, qkv_dt, base + (long long)t2 * C3 + C, HS) * scale;
			arow[t2] = s;
			m = fmaxf(m, s);
		}
		m = gt_warp_max(m);
		float sum = 0.0f;
		for (int t2 = lane; t2 <= t; t2 += GT_WARP) {
			float e = expf(arow[t2] - m);
			arow[t2] = e;
			sum += e;
		}
		float inv = 1.0f / gt_warp_sum(sum);
		for (int t2 = lane; t2 < T; t2 += GT_WARP) {
			arow[t2] = t2 <= t ? arow[t2] * inv : 0.0f;
		}
		__syncwarp();

		gt_att_wsum(arow, 1, 0, t + 1, qkv, qkv_dt, base + 2LL * C, C3, HS, out, out_dt,
		            (b * T + t) * (long long)C + (long long)h * HS);
	}
}

// gt_attention_backward_query: one warp per query row (b,h,t). With
// P = att: dP[t2] = dout_t·v_t2, dS[t2] = P[t2]·(dP[t2] − Σ P∘dP)·scale,
// written to the datt row (zero above the diagonal), then
// dq_t = Σ dS[t2]·k_t2. dk and dv are left to gt_attention_backward_kv,
// which reads the finished datt.
extern "C" __global__ void gt_attention_backward_query(void *dqkv, int dqkv_dt, float *datt, const void *dout, int dout_dt, const void *qkv, int qkv_dt, const float *att, int B, int T, int C, int NH, float scale) {
	int HS = C / NH;
	long long C3 = 3LL * C;
	long long rows = (long long)B * NH * T;
	int lane = threadIdx.x % GT_WARP;
	long long step = (long long)gridDim.x * GT_ATT_WARPS;
	for (long long row = (long long)blockIdx.x * GT_ATT_WARPS + threadIdx.x / GT_WARP; row < rows; row += step) {
		int t = (int)(row % T);
		long long bh = row / T;
		int h = (int)(bh % NH);
		long long b = bh / NH;
		long long base = b * T * C3 + (long long)h * HS;
		long long doff = (b * T + t) * (long long)C + (long long)h * HS;
		const float *prow = att + row * T;
		float *drow = datt + row * T;

		float dot = 0.0f;
		for (int t2 = lane; t2 <= t; t2 += GT_WARP) {
			float dp = gt_att_dot(dout, dout_dt, doff, qkv, qkv_dt, base + (long long)t2 * C3 + 2LL * C, HS);
			drow[t2] = dp;
			dot += prow[t2] * dp;
		}
		dot = gt_warp_sum(dot);
		for (int t2 = lane; t2 < T; t2 += GT_WARP) {
			drow[t2] = t2 <= t ? prow[t2] * (drow[t2] - dot) * scale : 0.0f;
		}
		__syncwarp();

		gt_att_wsum(drow, 1, 0, t + 1, qkv, qkv_dt, base + C, C3, HS, dqkv, dqkv_dt, base + (long long)t * C3);
	}
}

// gt_attention_backward_kv: one warp per key row (b,h,t2), after
// gt_attention_backward_query has filled datt. Only queries t ≥ t2 saw key
// t2: dk_t2 = Σ_t datt[t][t2]·q_t and dv_t2 = Σ_t att[t][t2]·dout_t, each
// walking a column of datt or att in t order.
extern "C" __global__ void gt_attention_backward_kv(void *dqkv, int dqkv_dt, const float *datt, const void *dout, int dout_dt, const void *qkv, int qkv_dt, const float *att, int B, int T, int C, int NH) {
	int HS = C / NH;
	long long C3 = 3LL * C;
	long long rows = (long long)B * NH * T;
	long long step = (long long)gridDim.x * GT_ATT_WARPS;
	for (long long row = (long long)blockIdx.x * GT_ATT_WARPS + threadIdx.x / GT_WARP; row < rows; row += step) {
		int t2 = (int)(row % T);
		long long bh = row / T;
		int h = (int)(bh % NH);
		long long b = bh / NH;
		long long base = b * T * C3 + (long long)h * HS;
		long long col = bh * T * (long long)T + t2; // element (t=0, t2) of this head's matrices
		long long kv = base + (long long)t2 * C3;

		gt_att_wsum(datt + col, T, t2, T, qkv, qkv_dt, base, C3, HS, dqkv, dqkv_dt, kv + C);
		gt_att_wsum(att + col, T, t2, T, dout, dout_dt, b * T * (long long)C + (long long)h * HS, C, HS, dqkv,
		            dqkv_dt, kv + 2LL * C);
	}
}
