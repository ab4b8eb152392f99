// elementwise.cu: element-wise ops over n elements of float tensors in any
// mix of dtypes: the residual add, in-place scaling, inverted dropout, and
// the dtype cast
// behind Copy between float buffers of different dtypes. A thread handles
// one pack of GT_PACK consecutive elements (packed.cuh: one 16-byte access
// per pack and array where it is aligned), reading the pack before writing
// it, so an output may alias an input. Every kernel walks the packs
// grid-stride, so any grid covers any n.

extern "C" __global__ void gt_add(void *out, int out_dt, const void *a, int a_dt, const void *b, int b_dt, long long n) {
	long long stride = (long long)gridDim.x * blockDim.x * GT_PACK;
	for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * GT_PACK; i < n; i += stride) {
		int m = gt_pack_len(i, n);
		float x[GT_PACK], y[GT_PACK];
		gt_load8(a, a_dt, i, m, x);
		gt_load8(b, b_dt, i, m, y);
#pragma unroll
		for (int k = 0; k < GT_PACK; k++) {
			x[k] += y[k];
		}
		gt_store8(out, out_dt, i, m, x);
	}
}

extern "C" __global__ void gt_scale(void *x, int x_dt, float s, long long n) {
	long long stride = (long long)gridDim.x * blockDim.x * GT_PACK;
	for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * GT_PACK; i < n; i += stride) {
		int m = gt_pack_len(i, n);
		float v[GT_PACK];
		gt_load8(x, x_dt, i, m, v);
#pragma unroll
		for (int k = 0; k < GT_PACK; k++) {
			v[k] *= s;
		}
		gt_store8(x, x_dt, i, m, v);
	}
}

// gt_dropout: out = inp·scale where element i's 32 random bits are at
// least threshold, else 0 (inverted dropout; out may alias inp). The bits
// are the high half of SplitMix64 at counter seed + (i+1)·φ, as the CPU
// backend computes them (backend.DropoutBits), so every backend draws the
// same mask and a backward pass reapplies it with the same seed.
__device__ __forceinline__ unsigned int gt_dropout_bits(unsigned long long seed, long long i) {
	unsigned long long z = seed + (unsigned long long)(i + 1) * 0x9E3779B97F4A7C15ull;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	z ^= z >> 31;
	return (unsigned int)(z >> 32);
}

extern "C" __global__ void gt_dropout(void *out, int out_dt, const void *inp, int inp_dt, long long n,
		unsigned long long seed, unsigned int threshold, float scale) {
	long long stride = (long long)gridDim.x * blockDim.x * GT_PACK;
	for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * GT_PACK; i < n; i += stride) {
		int m = gt_pack_len(i, n);
		float v[GT_PACK];
		gt_load8(inp, inp_dt, i, m, v);
#pragma unroll
		for (int k = 0; k < GT_PACK; k++) {
			v[k] = gt_dropout_bits(seed, i + k) >= threshold ? v[k] * scale : 0.0f;
		}
		gt_store8(out, out_dt, i, m, v);
	}
}

// gt_cast widens src to fp32 (exact) and rounds to dst's dtype once, so a
// 16-bit → 16-bit cast is the same as going through an fp32 buffer.
extern "C" __global__ void gt_cast(void *dst, int dst_dt, const void *src, int src_dt, long long n) {
	long long stride = (long long)gridDim.x * blockDim.x * GT_PACK;
	for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * GT_PACK; i < n; i += stride) {
		int m = gt_pack_len(i, n);
		float v[GT_PACK];
		gt_load8(src, src_dt, i, m, v);
		gt_store8(dst, dst_dt, i, m, v);
	}
}
