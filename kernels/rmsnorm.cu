// rmsnorm.cu: RMSNorm over N rows of C (the Llama family's norm, as
// transformers' LlamaRMSNorm: fp32 w·x/sqrt(mean(x²)+eps)), forward, the
// forward fused with the residual add before it, and backward. rstd (N)
// is F32; weight and dweight (C).
//
// Row kernels give each warp one row, lane l visiting the row's packs l,
// l+32, … (packed.cuh), as layernorm.cu does: a row's sums are warp
// butterflies, every lane holds the same bits, and which pack went as a
// vector changes nothing. dweight is a column sum over rows, computed
// without float atomics as per-chunk partials (one thread per pack of
// columns and chunk of rows, rows in order) that gt_matmul_dbias_reduce
// then adds in chunk order.

// gt_rms_row writes out = x·rstd·weight for row r of x (dtype x_dt), whose
// squares this lane has summed into ss, and saves rstd. Both forwards end
// in it, which is what makes the fused one bit-identical to the add and
// the plain forward. Every lane of the warp calls it.
__device__ __forceinline__ void gt_rms_row(void *out, int out_dt, float *rstd, const void *x, int x_dt, const void *weight, int weight_dt, long long r, int C, float eps, float ss) {
	int lane = threadIdx.x % GT_WARP;
	long long base = r * C;
	float rs = 1.0f / sqrtf(gt_warp_sum(ss) / (float)C + eps);
	for (int c = lane * GT_PACK; c < C; c += GT_WARP * GT_PACK) {
		int n = gt_pack_len(c, C);
		float v[GT_PACK], w[GT_PACK];
		gt_load8(x, x_dt, base + c, n, v);
		gt_load8(weight, weight_dt, c, n, w);
#pragma unroll
		for (int k = 0; k < GT_PACK; k++) {
			v[k] = v[k] * rs * w[k];
		}
		gt_store8(out, out_dt, base + c, n, v);
	}
	if (lane == 0) {
		rstd[r] = rs;
	}
}

// gt_rmsnorm_forward: rstd = 1/sqrt(mean(x²)+eps), out = x·rstd·weight,
// one warp per row.
extern "C" __global__ void gt_rmsnorm_forward(void *out, int out_dt, float *rstd, const void *inp, int inp_dt, const void *weight, int weight_dt, int N, int C, float eps) {
	int lane = threadIdx.x % GT_WARP;
	int warps = blockDim.x / GT_WARP;
	for (long long r = (long long)blockIdx.x * warps + threadIdx.x / GT_WARP; r < N; r += (long long)gridDim.x * warps) {
		float ss = 0.0f;
		for (int c = lane * GT_PACK; c < C; c += GT_WARP * GT_PACK) {
			float v[GT_PACK];
			gt_load8(inp, inp_dt, r * C + c, gt_pack_len(c, C), v);
#pragma unroll
			for (int k = 0; k < GT_PACK; k++) {
				ss += v[k] * v[k]; // v[k] is 0 past the row's end
			}
		}
		gt_rms_row(out, out_dt, rstd, inp, inp_dt, weight, weight_dt, r, C, eps, ss);
	}
}

// gt_residual_rmsnorm_forward: residual = a + b (rounded to its dtype and
// stored), then out and rstd exactly as gt_rmsnorm_forward computes them
// from the stored residual: bit-identical to gt_add then
// gt_rmsnorm_forward, with one launch and one pass over a and b. Each lane
// reads back only the packs it stored, so residual may alias a or b.
extern "C" __global__ void gt_residual_rmsnorm_forward(void *residual, int res_dt, void *out, int out_dt, float *rstd, const void *a, int a_dt, const void *b, int b_dt, const void *weight, int weight_dt, int N, int C, float eps) {
	int lane = threadIdx.x % GT_WARP;
	int warps = blockDim.x / GT_WARP;
	for (long long r = (long long)blockIdx.x * warps + threadIdx.x / GT_WARP; r < N; r += (long long)gridDim.x * warps) {
		long long base = r * C;
		float ss = 0.0f;
		for (int c = lane * GT_PACK; c < C; c += GT_WARP * GT_PACK) {
			int n = gt_pack_len(c, C);
			float x[GT_PACK], y[GT_PACK];
			gt_load8(a, a_dt, base + c, n, x);
			gt_load8(b, b_dt, base + c, n, y);
#pragma unroll
			for (int k = 0; k < GT_PACK; k++) {
				x[k] = k < n ? gt_round(res_dt, x[k] + y[k]) : 0.0f;
				ss += x[k] * x[k];
			}
			gt_store8(residual, res_dt, base + c, n, x);
		}
		gt_rms_row(out, out_dt, rstd, residual, res_dt, weight, weight_dt, r, C, eps, ss);
	}
}

// gt_rmsnorm_backward_dinp: with n = x·rstd and g = weight·dout,
// dinp = rstd·(g − n·mean(g·n)), one warp per row. A lane re-reads only
// the packs it read before writing them, so dinp may alias dout or inp.
extern "C" __global__ void gt_rmsnorm_backward_dinp(void *dinp, int dinp_dt, const void *dout, int dout_dt, const void *inp, int inp_dt, const void *weight, int weight_dt, const float *rstd, int N, int C) {
	int lane = threadIdx.x % GT_WARP;
	int warps = blockDim.x / GT_WARP;
	for (long long r = (long long)blockIdx.x * warps + threadIdx.x / GT_WARP; r < N; r += (long long)gridDim.x * warps) {
		long long base = r * C;
		float rs = rstd[r];
		float dot = 0.0f;
		for (int c = lane * GT_PACK; c < C; c += GT_WARP * GT_PACK) {
			int n = gt_pack_len(c, C);
			float x[GT_PACK], w[GT_PACK], d[GT_PACK];
			gt_load8(inp, inp_dt, base + c, n, x);
			gt_load8(weight, weight_dt, c, n, w);
			gt_load8(dout, dout_dt, base + c, n, d);
#pragma unroll
			for (int k = 0; k < GT_PACK; k++) {
				dot += (w[k] * d[k]) * (x[k] * rs);
			}
		}
		float m = gt_warp_sum(dot) / (float)C;
		for (int c = lane * GT_PACK; c < C; c += GT_WARP * GT_PACK) {
			int n = gt_pack_len(c, C);
			float x[GT_PACK], w[GT_PACK], d[GT_PACK];
			gt_load8(inp, inp_dt, base + c, n, x);
			gt_load8(weight, weight_dt, c, n, w);
			gt_load8(dout, dout_dt, base + c, n, d);
#pragma unroll
			for (int k = 0; k < GT_PACK; k++) {
				x[k] = rs * (w[k] * d[k] - x[k] * rs * m);
			}
			gt_store8(dinp, dinp_dt, base + c, n, x);
		}
	}
}

// gt_rmsnorm_backward_partial: for chunk k = blockIdx.y of rows_per_chunk
// rows and column c, partial[kC + c] = Σ dout·(x·rstd) over the chunk's
// rows, in row order. A thread sums one pack of columns; the grid's y
// covers every chunk and its x·blockDim.x every pack (checked by the
// launcher).
extern "C" __global__ void gt_rmsnorm_backward_partial(float *partial, const void *dout, int dout_dt, const void *inp, int inp_dt, const float *rstd, int N, int C, int rows_per_chunk) {
	int c = (blockIdx.x * blockDim.x + threadIdx.x) * GT_PACK;
	if (c >= C) {
		return;
	}
	int n = gt_pack_len(c, C);
	long long k = blockIdx.y;
	long long r0 = k * rows_per_chunk;
	long long r1 = r0 + rows_per_chunk < N ? r0 + rows_per_chunk : N;
	float pw[GT_PACK];
#pragma unroll
	for (int j = 0; j < GT_PACK; j++) {
		pw[j] = 0.0f;
	}
	for (long long r = r0; r < r1; r++) {
		float d[GT_PACK], x[GT_PACK];
		gt_load8(dout, dout_dt, r * C + c, n, d);
		gt_load8(inp, inp_dt, r * C + c, n, x);
		float rs = rstd[r];
#pragma unroll
		for (int j = 0; j < GT_PACK; j++) {
			pw[j] += d[j] * (x[j] * rs);
		}
	}
	gt_store8(partial, GT_F32, k * C + c, n, pw);
}
