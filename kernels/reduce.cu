// reduce.cu: whole-buffer reductions the optimizer needs, over n elements
// of a float buffer of any dtype.

// gt_sum_squares writes Σx² over the elements each block visits (block b:
// elements whose grid-stride loop starts in block b) to partials[b], in
// float64. The caller adds the gridDim.x partials in block order, so the
// total depends only on n and the grid size: the same bits on every run.
extern "C" __global__ void gt_sum_squares(double *partials, const void *x, int dt, long long n) {
	long long stride = (long long)gridDim.x * blockDim.x;
	double s = 0.0;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		double a = (double)gt_load(x, dt, i);
		s += a * a;
	}
	s = gt_block_sum_f64(s);
	if (threadIdx.x == 0) {
		partials[blockIdx.x] = s;
	}
}

// gt_nonfinite sets *flag to 1 if any element is a NaN or an Inf, tested on
// the exponent bits (all ones means Inf or NaN in every float format). The
// caller zeroes the flag first; racing stores all write the same 1.
extern "C" __global__ void gt_nonfinite(int *flag, const void *x, int dt, long long n) {
	long long stride = (long long)gridDim.x * blockDim.x;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		bool bad;
		if (dt == GT_F32) {
			bad = (((const unsigned int *)x)[i] & 0x7f800000u) == 0x7f800000u;
		} else {
			unsigned int mask = dt == GT_BF16 ? 0x7f80u : 0x7c00u;
			bad = (((const unsigned short *)x)[i] & mask) == mask;
		}
		if (bad) {
			*flag = 1;
		}
	}
}
