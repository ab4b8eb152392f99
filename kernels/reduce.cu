// reduce.cu: whole-buffer reductions the optimizer needs, over n elements
// of a float buffer of any dtype, a pack of GT_PACK per thread
// (packed.cuh), grid-stride.

// gt_sum_squares writes Σx² over the elements each block visits (block b:
// the packs whose grid-stride loop starts in block b) to partials[b], in
// float64. The caller adds the gridDim.x partials in block order, so the
// total depends only on n and the grid size: the same bits on every run.
extern "C" __global__ void gt_sum_squares(double *partials, const void *x, int dt, long long n) {
	long long stride = (long long)gridDim.x * blockDim.x * GT_PACK;
	double s = 0.0;
	for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * GT_PACK; i < n; i += stride) {
		float v[GT_PACK];
		gt_load8(x, dt, i, gt_pack_len(i, n), v);
#pragma unroll
		for (int k = 0; k < GT_PACK; k++) {
			double a = (double)v[k]; // 0 past the end
			s += a * a;
		}
	}
	s = gt_block_sum_f64(s);
	if (threadIdx.x == 0) {
		partials[blockIdx.x] = s;
	}
}

// gt_nonfinite sets *flag to 1 if any element is a NaN or an Inf, tested on
// the exponent bits of its fp32 widening (exact: a 16-bit Inf or NaN
// widens to an fp32 one). The caller zeroes the flag first; racing stores
// all write the same 1.
extern "C" __global__ void gt_nonfinite(int *flag, const void *x, int dt, long long n) {
	long long stride = (long long)gridDim.x * blockDim.x * GT_PACK;
	for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * GT_PACK; i < n; i += stride) {
		float v[GT_PACK];
		gt_load8(x, dt, i, gt_pack_len(i, n), v);
		bool bad = false;
#pragma unroll
		for (int k = 0; k < GT_PACK; k++) {
			bad = bad || (__float_as_uint(v[k]) & 0x7f800000u) == 0x7f800000u;
		}
		if (bad) {
			*flag = 1;
		}
	}
}

// gt_add_sum adds Σx over n F32 elements to *acc, in one block: each
// thread sums its strided elements in float64, the block adds the
// threads' sums in a fixed order, and thread 0 updates acc. One block is
// plenty for what it sums (a micro-batch's per-token losses) and keeps
// the result the same bits on every run with no second pass.
extern "C" __global__ void gt_add_sum(float *acc, const float *x, long long n) {
	double s = 0.0;
	for (long long i = threadIdx.x; i < n; i += blockDim.x) {
		s += (double)x[i];
	}
	s = gt_block_sum_f64(s);
	if (threadIdx.x == 0) {
		*acc = (float)((double)*acc + s);
	}
}
