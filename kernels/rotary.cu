// rotary.cu: the attention input's post-processing for the Llama family,
// in one pass over the projection qkv (B·T tokens of NH query, KV key and
// KV value heads of HD elements each): Qwen3's per-head RMSNorm of query
// and key heads (optional), the rotary position embedding of query and key
// heads at the token's position t = token mod T (transformers'
// rotate_half: pairs (j, j+HD/2) turned by the angle whose cosine and sine
// are cos[t,j] and sin[t,j], F32 (T, HD/2)), and the value heads copied.
//
// A warp handles one head of one token (heads grid-stride over the grid's
// warps), lane l the pairs j = l, l+32, …: a head's pairs are read
// coalesced, a head's sum is a warp butterfly, and each lane reads a pair
// before it writes it, so the output may alias the input. dqnorm and dknorm
// are column sums over tokens and heads, made deterministic as
// layernorm.cu's dweight: per-chunk partials of tokens (in order), then
// gt_matmul_dbias_reduce adds the chunks in order.

// gt_rope_unit locates head hd of token tok: its first element's index in
// qkv and the offset of its angles in cos and sin.
struct gt_rope_unit {
	long long base, tok;
	int hd, angle;
};

__device__ __forceinline__ gt_rope_unit gt_rope_at(long long u, int T, int NH, int KV, int HD) {
	int H = NH + 2 * KV;
	gt_rope_unit p;
	p.tok = u / H;
	p.hd = (int)(u % H);
	p.base = u * HD;
	p.angle = (int)(p.tok % T) * (HD / 2);
	return p;
}

// gt_copy_head copies the HD elements at base from src to dst (a value
// head), unless they are the same array.
__device__ __forceinline__ void gt_copy_head(void *dst, int dst_dt, const void *src, int src_dt, long long base, int HD) {
	if (dst == src && dst_dt == src_dt) {
		return;
	}
	for (int c = threadIdx.x % GT_WARP; c < HD; c += GT_WARP) {
		gt_store(dst, dst_dt, base + c, gt_load(src, src_dt, base + c));
	}
}

// gt_qkv_rotary_forward: out = the rotated (and, with qnorm and knorm,
// first normalised) qkv. With the norms, rstd[tok·(NH+KV) + hd] (F32) saves
// each query and key head's 1/sqrt(mean(x²)+eps); without them qnorm,
// knorm and rstd are null.
extern "C" __global__ void gt_qkv_rotary_forward(void *out, int out_dt, float *rstd, const void *qkv, int qkv_dt, const void *qnorm, int qnorm_dt, const void *knorm, int knorm_dt, const float *cos, const float *sin, int BT, int T, int NH, int KV, int HD, float eps) {
	int lane = threadIdx.x % GT_WARP;
	int warps = blockDim.x / GT_WARP;
	int h = HD / 2;
	long long units = (long long)BT * (NH + 2 * KV);
	for (long long u = (long long)blockIdx.x * warps + threadIdx.x / GT_WARP; u < units; u += (long long)gridDim.x * warps) {
		gt_rope_unit p = gt_rope_at(u, T, NH, KV, HD);
		if (p.hd >= NH + KV) {
			gt_copy_head(out, out_dt, qkv, qkv_dt, p.base, HD);
			continue;
		}
		float rs = 1.0f;
		const void *w = p.hd < NH ? qnorm : knorm;
		int w_dt = p.hd < NH ? qnorm_dt : knorm_dt;
		if (qnorm != 0) {
			float ss = 0.0f;
			for (int c = lane; c < HD; c += GT_WARP) {
				float x = gt_load(qkv, qkv_dt, p.base + c);
				ss += x * x;
			}
			rs = 1.0f / sqrtf(gt_warp_sum(ss) / (float)HD + eps);
			if (lane == 0) {
				rstd[p.tok * (NH + KV) + p.hd] = rs;
			}
		}
		for (int j = lane; j < h; j += GT_WARP) {
			float a = gt_load(qkv, qkv_dt, p.base + j);
			float b = gt_load(qkv, qkv_dt, p.base + j + h);
			if (qnorm != 0) {
				a = a * rs * gt_load(w, w_dt, j);
				b = b * rs * gt_load(w, w_dt, j + h);
			}
			float c = cos[p.angle + j], s = sin[p.angle + j];
			gt_store(out, out_dt, p.base + j, a * c - b * s);
			gt_store(out, out_dt, p.base + j + h, b * c + a * s);
		}
	}
}

// gt_rope_unrotate is the gradient of pair j of a head through the
// rotation (its transpose, the turn by −angle): dy_j and dy_{j+h} from
// dout's pair.
__device__ __forceinline__ void gt_rope_unrotate(const void *dout, int dout_dt, const float *cos, const float *sin, gt_rope_unit p, int j, int h, float *lo, float *hi) {
	float a = gt_load(dout, dout_dt, p.base + j);
	float b = gt_load(dout, dout_dt, p.base + j + h);
	float c = cos[p.angle + j], s = sin[p.angle + j];
	*lo = a * c + b * s;
	*hi = b * c - a * s;
}

// gt_qkv_rotary_backward: dqkv = the gradient w.r.t. the forward's qkv
// (=). Without norms it is dout turned back (qnorm, knorm and rstd null);
// with them, each query and key head's turned-back gradient dy goes through
// RMSNorm's backward: dqkv = rstd·(w·dy − n·mean(w·dy·n)), n = x·rstd.
// dqkv may alias dout.
extern "C" __global__ void gt_qkv_rotary_backward(void *dqkv, int dqkv_dt, const void *dout, int dout_dt, const void *qkv, int qkv_dt, const void *qnorm, int qnorm_dt, const void *knorm, int knorm_dt, const float *rstd, const float *cos, const float *sin, int BT, int T, int NH, int KV, int HD) {
	int lane = threadIdx.x % GT_WARP;
	int warps = blockDim.x / GT_WARP;
	int h = HD / 2;
	long long units = (long long)BT * (NH + 2 * KV);
	for (long long u = (long long)blockIdx.x * warps + threadIdx.x / GT_WARP; u < units; u += (long long)gridDim.x * warps) {
		gt_rope_unit p = gt_rope_at(u, T, NH, KV, HD);
		if (p.hd >= NH + KV) {
			gt_copy_head(dqkv, dqkv_dt, dout, dout_dt, p.base, HD);
			continue;
		}
		if (qnorm == 0) {
			for (int j = lane; j < h; j += GT_WARP) {
				float lo, hi;
				gt_rope_unrotate(dout, dout_dt, cos, sin, p, j, h, &lo, &hi);
				gt_store(dqkv, dqkv_dt, p.base + j, lo);
				gt_store(dqkv, dqkv_dt, p.base + j + h, hi);
			}
			continue;
		}
		const void *w = p.hd < NH ? qnorm : knorm;
		int w_dt = p.hd < NH ? qnorm_dt : knorm_dt;
		float rs = rstd[p.tok * (NH + KV) + p.hd];
		float dot = 0.0f;
		for (int j = lane; j < h; j += GT_WARP) {
			float lo, hi;
			gt_rope_unrotate(dout, dout_dt, cos, sin, p, j, h, &lo, &hi);
			dot += (gt_load(w, w_dt, j) * lo) * (gt_load(qkv, qkv_dt, p.base + j) * rs);
			dot += (gt_load(w, w_dt, j + h) * hi) * (gt_load(qkv, qkv_dt, p.base + j + h) * rs);
		}
		float m = gt_warp_sum(dot) / (float)HD;
		for (int j = lane; j < h; j += GT_WARP) {
			float lo, hi;
			gt_rope_unrotate(dout, dout_dt, cos, sin, p, j, h, &lo, &hi);
			float xl = gt_load(qkv, qkv_dt, p.base + j), xh = gt_load(qkv, qkv_dt, p.base + j + h);
			gt_store(dqkv, dqkv_dt, p.base + j, rs * (gt_load(w, w_dt, j) * lo - xl * rs * m));
			gt_store(dqkv, dqkv_dt, p.base + j + h, rs * (gt_load(w, w_dt, j + h) * hi - xh * rs * m));
		}
	}
}

// gt_qkv_rotary_backward_partial: the norms' gradients as per-chunk
// partial sums. Thread col of 2·HD (col < HD: dqnorm's column col, summed
// over query heads; else dknorm's column col−HD, over key heads), chunk k =
// blockIdx.y of tokens_per_chunk tokens: partial[(kind·chunks + k)·HD + c]
// = Σ dy_c·x_c·rstd over the chunk's tokens in order and, per token, the
// kind's heads in order. The grid's y covers every chunk and its
// x·blockDim.x the 2·HD columns (checked by the launcher).
extern "C" __global__ void gt_qkv_rotary_backward_partial(float *partial, const void *dout, int dout_dt, const void *qkv, int qkv_dt, const float *rstd, const float *cos, const float *sin, int BT, int T, int NH, int KV, int HD, int tokens_per_chunk) {
	int col = blockIdx.x * blockDim.x + threadIdx.x;
	if (col >= 2 * HD) {
		return;
	}
	int kind = col / HD, c = col % HD, h = HD / 2;
	int j = c < h ? c : c - h;
	int hd0 = kind == 0 ? 0 : NH, hd1 = kind == 0 ? NH : NH + KV;
	long long k = blockIdx.y, chunks = gridDim.y;
	long long t0 = k * tokens_per_chunk;
	long long t1 = t0 + tokens_per_chunk < BT ? t0 + tokens_per_chunk : BT;
	float acc = 0.0f;
	for (long long tok = t0; tok < t1; tok++) {
		for (int hd = hd0; hd < hd1; hd++) {
			gt_rope_unit p = gt_rope_at(tok * (NH + 2 * KV) + hd, T, NH, KV, HD);
			float lo, hi;
			gt_rope_unrotate(dout, dout_dt, cos, sin, p, j, h, &lo, &hi);
			float dy = c < h ? lo : hi;
			acc += dy * (gt_load(qkv, qkv_dt, p.base + c) * rstd[tok * (NH + KV) + hd]);
		}
	}
	partial[(kind * chunks + k) * HD + c] = acc;
}
