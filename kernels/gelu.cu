// gelu.cu: GPT-2's tanh GELU over n elements, forward and backward.
//
// 0.5·(1+tanh(u)) = σ(2u) = 1/(1+e) with e = exp(−2u), u = √(2/π)(x+0.044715x³):
// one expf and no tanhf, and the derivative σ(2u)(1−σ(2u)) = e·σ² has no
// cancellation. The exponent is clamped below fp32's overflow (as the CPU
// backend's exp does), so e stays finite and e·σ → 1 rather than Inf·0
// for very negative x. One thread per pack of GT_PACK elements
// (packed.cuh), grid-stride; an output may alias an input.

#define GT_GELU_K 0.7978845608028654f // √(2/π)
#define GT_GELU_A 0.044715f
#define GT_GELU_MAX_ARG 88.0f // expf(88) ≈ 1.65e38 < FLT_MAX

__device__ __forceinline__ float gt_gelu_exp(float x) {
	return expf(fminf(-2.0f * GT_GELU_K * (x + GT_GELU_A * x * x * x), GT_GELU_MAX_ARG));
}

extern "C" __global__ void gt_gelu_forward(void *out, int out_dt, const void *inp, int inp_dt, long long n) {
	long long stride = (long long)gridDim.x * blockDim.x * GT_PACK;
	for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * GT_PACK; i < n; i += stride) {
		int m = gt_pack_len(i, n);
		float x[GT_PACK];
		gt_load8(inp, inp_dt, i, m, x);
#pragma unroll
		for (int k = 0; k < GT_PACK; k++) {
			x[k] = x[k] / (1.0f + gt_gelu_exp(x[k]));
		}
		gt_store8(out, out_dt, i, m, x);
	}
}

// gt_gelu_backward: dinp = gelu'(x)·dout with gelu'(x) = σ + 2x·e·σ²·u'(x),
// u'(x) = √(2/π)(1+3·0.044715x²).
extern "C" __global__ void gt_gelu_backward(void *dinp, int dinp_dt, const void *inp, int inp_dt, const void *dout, int dout_dt, long long n) {
	long long stride = (long long)gridDim.x * blockDim.x * GT_PACK;
	for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * GT_PACK; i < n; i += stride) {
		int m = gt_pack_len(i, n);
		float x[GT_PACK], d[GT_PACK];
		gt_load8(inp, inp_dt, i, m, x);
		gt_load8(dout, dout_dt, i, m, d);
#pragma unroll
		for (int k = 0; k < GT_PACK; k++) {
			float e = gt_gelu_exp(x[k]);
			float sg = 1.0f / (1.0f + e);
			float du = GT_GELU_K * (1.0f + 3.0f * GT_GELU_A * x[k] * x[k]);
			// e·σ ≤ 1 is formed first: e alone may be ~1e38.
			float g = sg + 2.0f * x[k] * du * (e * sg) * sg;
			d[k] *= g;
		}
		gt_store8(dinp, dinp_dt, i, m, d);
	}
}
