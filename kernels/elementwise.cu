// elementwise.cu: element-wise ops over n elements of float tensors in any
// mix of dtypes: the residual add, in-place scaling, and the dtype cast
// behind Copy between float buffers of different dtypes. Each element is
// read and written by one thread, so an output may alias an input. Every
// kernel walks the elements grid-stride, so any grid covers any n.

extern "C" __global__ void gt_add(void *out, int out_dt, const void *a, int a_dt, const void *b, int b_dt, long long n) {
	long long stride = (long long)gridDim.x * blockDim.x;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		gt_store(out, out_dt, i, gt_load(a, a_dt, i) + gt_load(b, b_dt, i));
	}
}

extern "C" __global__ void gt_scale(void *x, int x_dt, float s, long long n) {
	long long stride = (long long)gridDim.x * blockDim.x;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		gt_store(x, x_dt, i, gt_load(x, x_dt, i) * s);
	}
}

// gt_cast widens src to fp32 (exact) and rounds to dst's dtype once, so a
// 16-bit → 16-bit cast is the same as going through an fp32 buffer.
extern "C" __global__ void gt_cast(void *dst, int dst_dt, const void *src, int src_dt, long long n) {
	long long stride = (long long)gridDim.x * blockDim.x;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		gt_store(dst, dst_dt, i, gt_load(src, src_dt, i));
	}
}
