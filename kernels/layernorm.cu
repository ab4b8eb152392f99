// layernorm.cu: LayerNorm over N rows of C, forward and backward.
// mean and rstd (N) are F32; weight, bias, dweight, dbias (C).
//
// Row kernels give each warp one row (rows grid-stride over the grid's
// warps), so a row's sums are warp butterflies with no shared memory and
// every lane holds the same bits. dweight and dbias are column sums over
// all rows; to keep them deterministic without float atomics, one kernel
// writes per-chunk partial sums (one thread per column and chunk of rows,
// rows in order) and a second adds the chunks, in chunk order, onto the
// accumulated gradients, which are therefore loaded and rounded once.

#define GT_LN_EPS 1e-5f

// gt_ln_row finishes LayerNorm of row r, whose elements x (dtype x_dt)
// this lane has summed into s: the mean is corrected in a second pass
// (with m0 the fp32 mean and d = x−m0, mean = m0 + Σd/C and var =
// Σd²/C − (Σd/C)²), so a row whose mean is large next to its spread
// (0.5 ± 0.01) keeps its mean accurate without double arithmetic. Every
// lane of the warp calls it.
__device__ __forceinline__ void gt_ln_row(void *out, int out_dt, float *mean, float *rstd, const void *x, int x_dt, const void *weight, int weight_dt, const void *bias, int bias_dt, long long r, int C, float s) {
	int lane = threadIdx.x % GT_WARP;
	long long base = r * C;
	float m0 = gt_warp_sum(s) / (float)C;
	float d1 = 0.0f, d2 = 0.0f;
	for (int c = lane; c < C; c += GT_WARP) {
		float d = gt_load(x, x_dt, base + c) - m0;
		d1 += d;
		d2 += d * d;
	}
	float corr = gt_warp_sum(d1) / (float)C;
	float var = fmaxf(gt_warp_sum(d2) / (float)C - corr * corr, 0.0f);
	float m = m0 + corr;
	float rs = 1.0f / sqrtf(var + GT_LN_EPS);
	for (int c = lane; c < C; c += GT_WARP) {
		float v = (gt_load(x, x_dt, base + c) - m) * rs * gt_load(weight, weight_dt, c) + gt_load(bias, bias_dt, c);
		gt_store(out, out_dt, base + c, v);
	}
	if (lane == 0) {
		mean[r] = m;
		rstd[r] = rs;
	}
}

// gt_layernorm_forward: out = (x−mean)·rstd·weight + bias, one warp per
// row.
extern "C" __global__ void gt_layernorm_forward(void *out, int out_dt, float *mean, float *rstd, const void *inp, int inp_dt, const void *weight, int weight_dt, const void *bias, int bias_dt, int N, int C) {
	int lane = threadIdx.x % GT_WARP;
	int warps = blockDim.x / GT_WARP;
	for (long long r = (long long)blockIdx.x * warps + threadIdx.x / GT_WARP; r < N; r += (long long)gridDim.x * warps) {
		float s = 0.0f;
		for (int c = lane; c < C; c += GT_WARP) {
			s += gt_load(inp, inp_dt, r * C + c);
		}
		gt_ln_row(out, out_dt, mean, rstd, inp, inp_dt, weight, weight_dt, bias, bias_dt, r, C, s);
	}
}

// gt_layernorm_backward_dinp: with n = (x−mean)·rstd and g = weight·dout,
// dinp = rstd·(g − mean(g) − n·mean(g·n)), one warp per row.
extern "C" __global__ void gt_layernorm_backward_dinp(void *dinp, int dinp_dt, const void *dout, int dout_dt, const void *inp, int inp_dt, const void *weight, int weight_dt, const float *mean, const float *rstd, int N, int C) {
	int lane = threadIdx.x % GT_WARP;
	int warps = blockDim.x / GT_WARP;
	for (long long r = (long long)blockIdx.x * warps + threadIdx.x / GT_WARP; r < N; r += (long long)gridDim.x * warps) {
		long long base = r * C;
		float m = mean[r], rs = rstd[r];
		float gs = 0.0f, gns = 0.0f;
		for (int c = lane; c < C; c += GT_WARP) {
			float n = (gt_load(inp, inp_dt, base + c) - m) * rs;
			float g = gt_load(weight, weight_dt, c) * gt_load(dout, dout_dt, base + c);
			gs += g;
			gns += g * n;
		}
		float gMean = gt_warp_sum(gs) / (float)C;
		float gnMean = gt_warp_sum(gns) / (float)C;
		for (int c = lane; c < C; c += GT_WARP) {
			float n = (gt_load(inp, inp_dt, base + c) - m) * rs;
			float g = gt_load(weight, weight_dt, c) * gt_load(dout, dout_dt, base + c);
			gt_store(dinp, dinp_dt, base + c, rs * (g - gMean - n * gnMean));
		}
	}
}

// gt_layernorm_backward_partial: for chunk k = blockIdx.y of rows_per_chunk
// rows and column c, partial[2kC + c] = Σ n·dout and partial[2kC + C + c] =
// Σ dout over the chunk's rows, in row order. The grid's y covers every
// chunk and its x·blockDim.x every column (checked by the launcher).
extern "C" __global__ void gt_layernorm_backward_partial(float *partial, const void *dout, int dout_dt, const void *inp, int inp_dt, const float *mean, const float *rstd, int N, int C, int rows_per_chunk) {
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= C) {
		return;
	}
	long long k = blockIdx.y;
	long long r0 = k * rows_per_chunk;
	long long r1 = r0 + rows_per_chunk < N ? r0 + rows_per_chunk : N;
	float pw = 0.0f, pb = 0.0f;
	for (long long r = r0; r < r1; r++) {
		float d = gt_load(dout, dout_dt, r * C + c);
		pw += (gt_load(inp, inp_dt, r * C + c) - mean[r]) * rstd[r] * d;
		pb += d;
	}
	partial[2 * k * C + c] = pw;
	partial[2 * k * C + C + c] = pb;
}

// gt_layernorm_backward_reduce: dweight[c] += Σ_k partial[2kC + c] and
// dbias[c] += Σ_k partial[2kC + C + c], chunks in order; one thread per c.
extern "C" __global__ void gt_layernorm_backward_reduce(void *dweight, int dweight_dt, void *dbias, int dbias_dt, const float *partial, int chunks, int C) {
	for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x) {
		float w = gt_load(dweight, dweight_dt, c);
		float b = gt_load(dbias, dbias_dt, c);
		for (long long k = 0; k < chunks; k++) {
			w += partial[2 * k * C + c];
			b += partial[2 * k * C + C + c];
		}
		gt_store(dweight, dweight_dt, c, w);
		gt_store(dbias, dbias_dt, c, b);
	}
}

// gt_residual_layernorm_forward fuses the residual add with the LayerNorm
// that follows it: residual = a + b (rounded to its dtype and stored), then
// out, mean and rstd exactly as gt_layernorm_forward computes them from the
// stored residual, so the result is bit-identical to the two-op sequence
// with one launch and no separate pass over a and b. Each lane reads back
// only the elements it stored, so residual may alias a or b.
extern "C" __global__ void gt_residual_layernorm_forward(void *residual, int res_dt, void *out, int out_dt, float *mean, float *rstd, const void *a, int a_dt, const void *b, int b_dt, const void *weight, int weight_dt, const void *bias, int bias_dt, int N, int C) {
	int lane = threadIdx.x % GT_WARP;
	int warps = blockDim.x / GT_WARP;
	for (long long r = (long long)blockIdx.x * warps + threadIdx.x / GT_WARP; r < N; r += (long long)gridDim.x * warps) {
		long long base = r * C;
		float s = 0.0f;
		for (int c = lane; c < C; c += GT_WARP) {
			float x = gt_round(res_dt, gt_load(a, a_dt, base + c) + gt_load(b, b_dt, base + c));
			gt_store(residual, res_dt, base + c, x);
			s += x;
		}
		gt_ln_row(out, out_dt, mean, rstd, residual, res_dt, weight, weight_dt, bias, bias_dt, r, C, s);
	}
}
