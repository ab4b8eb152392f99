// attention.cu: the kernels between the GEMMs of causal self-attention
// with grouped key/value heads. The products themselves (scores Q·Kᵀ,
// P·V and backward's four) are cuBLAS strided-batched GEMMs queued by
// backend/cuda, on tensor cores in bf16; these kernels gather, mask,
// normalise and scatter.
//
// B = batch, T = sequence length, NH = query heads, KV = key/value heads,
// G = NH/KV, HD = head size. qkv (B,T,(NH+2·KV)·HD) holds per token NH
// query heads, then KV key heads, then KV value heads; query head h reads
// key/value head h/G. out and dout are (B,T,NH·HD); lse (B,NH,T) is F32.
//
// Work goes in chunks of query rows [r0, r0+rows). A chunk's rows are laid
// out per key/value head: for batch row b and group g, M = G·rows rows,
// row r being token t = r0 + r/G of query head h = g·G + r%G (the group's
// heads side by side, as qkv stores them), so one GEMM serves the whole
// group. Chunk buffers index rows by (b·KV + g)·M + r. A chunk's scores
// have cols = r0 + rows columns (keys 0 … its last row), with row stride
// ld: columns past a row's own token are masked here, columns past the
// chunk's last row are never computed (causal attention costs about half
// of the full product).
//
// Every output element is written by exactly one thread and every sum has
// a fixed order, so results are the same bits on every run.

#define GT_ATT_THREADS 128
#define GT_ATT_WARPS (GT_ATT_THREADS / GT_WARP)

// gt_att_row decodes chunk row q·M + r (q = b·KV + g) into its batch row
// b, query head h and token t.
__device__ __forceinline__ void gt_att_row(long long row, int KV, int G, int rows, int r0, long long *b, int *h, int *t) {
	long long M = (long long)G * rows;
	long long q = row / M;
	int r = (int)(row % M);
	*b = q / KV;
	*h = (int)(q % KV) * G + r % G;
	*t = r0 + r / G;
}

// gt_attention_gather: one warp per chunk row. When qc is not null it
// receives the row's query (from qkv), when doc is not null its output
// gradient (from dout), both in dtype cdt with row stride HD; when dc is
// not null, dc[row] = D = Σ_d dout·out, which backward's dS needs (read
// from the stored out, as the CPU backend does).
extern "C" __global__ void gt_attention_gather(void *qc, void *doc, int cdt, float *dc, const void *qkv, int qkv_dt, const void *dout, int dout_dt, const void *out, int out_dt, int B, int T, int NH, int KV, int HD, int r0, int rows) {
	int G = NH / KV;
	long long S = (long long)(NH + 2 * KV) * HD, CO = (long long)NH * HD;
	long long n = (long long)B * NH * rows;
	int lane = threadIdx.x % GT_WARP;
	long long step = (long long)gridDim.x * GT_ATT_WARPS;
	for (long long row = (long long)blockIdx.x * GT_ATT_WARPS + threadIdx.x / GT_WARP; row < n; row += step) {
		long long b;
		int h, t;
		gt_att_row(row, KV, G, rows, r0, &b, &h, &t);
		long long qoff = (b * T + t) * S + (long long)h * HD;
		long long ooff = (b * T + t) * CO + (long long)h * HD;
		float d = 0.0f;
		for (int i = lane; i < HD; i += GT_WARP) {
			if (qc != 0) {
				gt_store(qc, cdt, row * HD + i, gt_load(qkv, qkv_dt, qoff + i));
			}
			if (doc != 0 || dc != 0) {
				float g = gt_load(dout, dout_dt, ooff + i);
				if (doc != 0) {
					gt_store(doc, cdt, row * HD + i, g);
				}
				if (dc != 0) {
					d += g * gt_load(out, out_dt, ooff + i);
				}
			}
		}
		if (dc != 0) {
			d = gt_warp_sum(d);
			if (lane == 0) {
				dc[row] = d;
			}
		}
	}
}

// gt_att_merge folds the softmax state (m2, l2) into (m, l): m a running
// max, l = Σ e^(x−m) over the scores seen; (−Inf, 0) is the empty state.
__device__ __forceinline__ void gt_att_merge(float &m, float &l, float m2, float l2) {
	float mm = fmaxf(m, m2);
	if (mm == GT_NEG_INF) {
		return;
	}
	l = l * expf(m - mm) + l2 * expf(m2 - mm);
	m = mm;
}

// gt_attention_softmax: one warp per chunk row of scaled scores s (F32,
// row stride ld). Keys 0 … t of the row's token t are live: their
// probabilities e^(s−m)/l go to p (dtype p_dt, same stride; p may be s
// itself, each element being read before the same lane overwrites it),
// keys t+1 … cols−1 get 0, and lse[b,h,t] = m + log l. Each lane keeps a
// running (m, l) over its columns, then the lanes merge in a fixed
// butterfly.
extern "C" __global__ void gt_attention_softmax(void *p, int p_dt, float *lse, const float *s, long long ld, int B, int T, int NH, int KV, int r0, int rows, int cols) {
	int G = NH / KV;
	long long n = (long long)B * NH * rows;
	int lane = threadIdx.x % GT_WARP;
	long long step = (long long)gridDim.x * GT_ATT_WARPS;
	for (long long row = (long long)blockIdx.x * GT_ATT_WARPS + threadIdx.x / GT_WARP; row < n; row += step) {
		long long b;
		int h, t;
		gt_att_row(row, KV, G, rows, r0, &b, &h, &t);
		const float *sr = s + row * ld;
		float m = GT_NEG_INF, l = 0.0f;
		for (int c = lane; c <= t; c += GT_WARP) {
			GT_EMU_POINT();
			gt_att_merge(m, l, sr[c], 1.0f);
		}
		for (int k = GT_WARP / 2; k > 0; k >>= 1) {
			float om = __shfl_xor_sync(GT_FULL_MASK, m, k);
			float ol = __shfl_xor_sync(GT_FULL_MASK, l, k);
			gt_att_merge(m, l, om, ol);
		}
		float inv = 1.0f / l;
		for (int c = lane; c < cols; c += GT_WARP) {
			float v = 0.0f;
			if (c <= t) {
				GT_EMU_POINT();
				v = expf(sr[c] - m) * inv;
			}
			gt_store(p, p_dt, row * ld + c, v);
		}
		if (lane == 0) {
			lse[(b * NH + h) * T + t] = m + logf(l);
		}
	}
}

// gt_attention_dsoftmax: one block per chunk row, threads over its cols
// columns: from the recomputed scaled scores s and dP = dO·Vᵀ (F32, row
// stride ld), P = e^(s − lse) on keys 0 … t and 0 after, and
// dS = P·(dP − D), both stored in dtype dt (p may be s and ds may be dp:
// every element is read and written by one thread).
extern "C" __global__ void gt_attention_dsoftmax(void *p, void *ds, int dt, const float *s, const float *dp, long long ld, const float *lse, const float *dc, int B, int T, int NH, int KV, int r0, int rows, int cols) {
	int G = NH / KV;
	long long n = (long long)B * NH * rows;
	for (long long row = blockIdx.x; row < n; row += gridDim.x) {
		long long b;
		int h, t;
		gt_att_row(row, KV, G, rows, r0, &b, &h, &t);
		float L = lse[(b * NH + h) * T + t];
		float D = dc[row];
		for (int c = threadIdx.x; c < cols; c += blockDim.x) {
			long long i = row * ld + c;
			float pv = 0.0f, dv = 0.0f;
			if (c <= t) {
				GT_EMU_POINT();
				pv = expf(s[i] - L);
				dv = pv * (dp[i] - D);
			}
			gt_store(p, dt, i, pv);
			gt_store(ds, dt, i, dv);
		}
	}
}

// gt_attention_scatter copies chunk rows back into a token-major tensor:
// source row (b·U + u)·M + r (M = G·rows, row stride HD, dtype src_dt) is
// token t = r0 + r/G, head u·G + r%G, and lands at dst[(b·T + t)·dst_ld +
// (hoff + head)·HD] (dtype dst_dt). With U = KV it writes a chunk's output
// or query gradient; with G = 1, rows = T and hoff = NH (or NH + KV) the
// key (value) gradients accumulated in fp32. One thread per element.
extern "C" __global__ void gt_attention_scatter(void *dst, int dst_dt, long long dst_ld, int hoff, const void *src, int src_dt, int B, int T, int U, int G, int HD, int r0, int rows) {
	long long M = (long long)G * rows;
	long long n = (long long)B * U * M * HD;
	long long step = (long long)gridDim.x * blockDim.x;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
		long long row = i / HD;
		int d = (int)(i % HD);
		long long q = row / M;
		int r = (int)(row % M);
		long long b = q / U;
		int head = (int)(q % U) * G + r % G;
		int t = r0 + r / G;
		gt_store(dst, dst_dt, (b * T + t) * dst_ld + (long long)(hoff + head) * HD + d, gt_load(src, src_dt, i));
	}
}
