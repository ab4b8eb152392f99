// layernorm.cu: LayerNorm over N rows of C, forward and backward.
// mean and rstd (N) are F32; weight, bias, dweight, dbias (C).
//
// Row kernels give each warp one row (rows grid-stride over the grid's
// warps), so a row's sums are warp butterflies with no shared memory and
// every lane holds the same bits. Lane l visits the row's packs l, l+32,
// … (packed.cuh), so a warp reads 32 consecutive 16-byte words per access,
// and what a lane sums, and in which order, does not depend on whether a
// pack was moved as a vector. dweight and dbias are column sums over all
// rows; to keep them deterministic without float atomics, one kernel
// writes per-chunk partial sums (one thread per pack of columns and chunk
// of rows, rows in order) and a second adds the chunks, in chunk order,
// onto the accumulated gradients, which are therefore loaded and rounded
// once.

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
	for (int c = lane * GT_PACK; c < C; c += GT_WARP * GT_PACK) {
		int n = gt_pack_len(c, C);
		float v[GT_PACK];
		gt_load8(x, x_dt, base + c, n, v);
#pragma unroll
		for (int k = 0; k < GT_PACK; k++) {
			if (k < n) {
				float d = v[k] - m0;
				d1 += d;
				d2 += d * d;
			}
		}
	}
	float corr = gt_warp_sum(d1) / (float)C;
	float var = fmaxf(gt_warp_sum(d2) / (float)C - corr * corr, 0.0f);
	float m = m0 + corr;
	float rs = 1.0f / sqrtf(var + GT_LN_EPS);
	for (int c = lane * GT_PACK; c < C; c += GT_WARP * GT_PACK) {
		int n = gt_pack_len(c, C);
		float v[GT_PACK], w[GT_PACK], b[GT_PACK];
		gt_load8(x, x_dt, base + c, n, v);
		gt_load8(weight, weight_dt, c, n, w);
		gt_load8(bias, bias_dt, c, n, b);
#pragma unroll
		for (int k = 0; k < GT_PACK; k++) {
			v[k] = (v[k] - m) * rs * w[k] + b[k];
		}
		gt_store8(out, out_dt, base + c, n, v);
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
		for (int c = lane * GT_PACK; c < C; c += GT_WARP * GT_PACK) {
			int n = gt_pack_len(c, C);
			float v[GT_PACK];
			gt_load8(inp, inp_dt, r * C + c, n, v);
#pragma unroll
			for (int k = 0; k < GT_PACK; k++) {
				s += v[k]; // v[k] is 0 past the row's end
			}
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
		for (int c = lane * GT_PACK; c < C; c += GT_WARP * GT_PACK) {
			int n = gt_pack_len(c, C);
			float x[GT_PACK], w[GT_PACK], d[GT_PACK];
			gt_load8(inp, inp_dt, base + c, n, x);
			gt_load8(weight, weight_dt, c, n, w);
			gt_load8(dout, dout_dt, base + c, n, d);
#pragma unroll
			for (int k = 0; k < GT_PACK; k++) {
				if (k < n) {
					float nk = (x[k] - m) * rs;
					float g = w[k] * d[k];
					gs += g;
					gns += g * nk;
				}
			}
		}
		float gMean = gt_warp_sum(gs) / (float)C;
		float gnMean = gt_warp_sum(gns) / (float)C;
		for (int c = lane * GT_PACK; c < C; c += GT_WARP * GT_PACK) {
			int n = gt_pack_len(c, C);
			float x[GT_PACK], w[GT_PACK], d[GT_PACK];
			gt_load8(inp, inp_dt, base + c, n, x);
			gt_load8(weight, weight_dt, c, n, w);
			gt_load8(dout, dout_dt, base + c, n, d);
#pragma unroll
			for (int k = 0; k < GT_PACK; k++) {
				float nk = (x[k] - m) * rs;
				float g = w[k] * d[k];
				x[k] = rs * (g - gMean - nk * gnMean);
			}
			gt_store8(dinp, dinp_dt, base + c, n, x);
		}
	}
}

// gt_layernorm_backward_partial: for chunk k = blockIdx.y of rows_per_chunk
// rows and column c, partial[2kC + c] = Σ n·dout and partial[2kC + C + c] =
// Σ dout over the chunk's rows, in row order. A thread sums one pack of
// columns; the grid's y covers every chunk and its x·blockDim.x every pack
// (checked by the launcher).
extern "C" __global__ void gt_layernorm_backward_partial(float *partial, const void *dout, int dout_dt, const void *inp, int inp_dt, const float *mean, const float *rstd, int N, int C, int rows_per_chunk) {
	int c = (blockIdx.x * blockDim.x + threadIdx.x) * GT_PACK;
	if (c >= C) {
		return;
	}
	int n = gt_pack_len(c, C);
	long long k = blockIdx.y;
	long long r0 = k * rows_per_chunk;
	long long r1 = r0 + rows_per_chunk < N ? r0 + rows_per_chunk : N;
	float pw[GT_PACK], pb[GT_PACK];
#pragma unroll
	for (int j = 0; j < GT_PACK; j++) {
		pw[j] = 0.0f;
		pb[j] = 0.0f;
	}
	for (long long r = r0; r < r1; r++) {
		float d[GT_PACK], x[GT_PACK];
		gt_load8(dout, dout_dt, r * C + c, n, d);
		gt_load8(inp, inp_dt, r * C + c, n, x);
		float m = mean[r], rs = rstd[r];
#pragma unroll
		for (int j = 0; j < GT_PACK; j++) {
			pw[j] += (x[j] - m) * rs * d[j];
			pb[j] += d[j];
		}
	}
	gt_store8(partial, GT_F32, 2 * k * C + c, n, pw);
	gt_store8(partial, GT_F32, 2 * k * C + C + c, n, pb);
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
// only the packs it stored, so residual may alias a or b.
extern "C" __global__ void gt_residual_layernorm_forward(void *residual, int res_dt, void *out, int out_dt, float *mean, float *rstd, const void *a, int a_dt, const void *b, int b_dt, const void *weight, int weight_dt, const void *bias, int bias_dt, int N, int C) {
	int lane = threadIdx.x % GT_WARP;
	int warps = blockDim.x / GT_WARP;
	for (long long r = (long long)blockIdx.x * warps + threadIdx.x / GT_WARP; r < N; r += (long long)gridDim.x * warps) {
		long long base = r * C;
		float s = 0.0f;
		for (int c = lane * GT_PACK; c < C; c += GT_WARP * GT_PACK) {
			int n = gt_pack_len(c, C);
			float x[GT_PACK], y[GT_PACK];
			gt_load8(a, a_dt, base + c, n, x);
			gt_load8(b, b_dt, base + c, n, y);
#pragma unroll
			for (int k = 0; k < GT_PACK; k++) {
				x[k] = k < n ? gt_round(res_dt, x[k] + y[k]) : 0.0f;
				s += x[k];
			}
			gt_store8(residual, res_dt, base + c, n, x);
		}
		gt_ln_row(out, out_dt, mean, rstd, residual, res_dt, weight, weight_dt, bias, bias_dt, r, C, s);
	}
}
