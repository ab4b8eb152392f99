// swiglu.cu: the Llama family's MLP activation, fused: out (N, I) =
// silu(gate)·up from inp (N, 2·I), each row holding its I gate_proj
// outputs then its I up_proj outputs; and its backward. One thread per
// pack of GT_PACK columns of a row (packed.cuh), grid-stride over every
// row's packs, so one kernel reads both halves and writes the product in
// a single pass.
//
// silu(g) = g·σ(g) with σ(g) = 1/(1+e), e = exp(−g) clamped below fp32's
// overflow as gelu.cu does: e stays finite for very negative g, and σ's
// derivative σ·(1−σ) = σ·(e·σ) has no cancellation.

#define GT_SILU_MAX_ARG 88.0f // expf(88) ≈ 1.65e38 < FLT_MAX

__device__ __forceinline__ float gt_silu_exp(float g) { return expf(fminf(-g, GT_SILU_MAX_ARG)); }

extern "C" __global__ void gt_swiglu_forward(void *out, int out_dt, const void *inp, int inp_dt, int N, int I) {
	long long rowPacks = (I + GT_PACK - 1) / GT_PACK;
	long long units = (long long)N * rowPacks;
	for (long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x; u < units; u += (long long)gridDim.x * blockDim.x) {
		long long r = u / rowPacks;
		int i = (int)(u % rowPacks) * GT_PACK;
		int n = gt_pack_len(i, I);
		float g[GT_PACK], v[GT_PACK];
		gt_load8(inp, inp_dt, r * 2 * I + i, n, g);
		gt_load8(inp, inp_dt, r * 2 * I + I + i, n, v);
#pragma unroll
		for (int k = 0; k < GT_PACK; k++) {
			v[k] = g[k] / (1.0f + gt_silu_exp(g[k])) * v[k];
		}
		gt_store8(out, out_dt, r * I + i, n, v);
	}
}

// gt_swiglu_backward: dinp (N, 2·I) = the gradient w.r.t. inp (=):
// dgate = dout·up·σ·(1 + g·(1−σ)), dup = dout·silu(g).
extern "C" __global__ void gt_swiglu_backward(void *dinp, int dinp_dt, const void *dout, int dout_dt, const void *inp, int inp_dt, int N, int I) {
	long long rowPacks = (I + GT_PACK - 1) / GT_PACK;
	long long units = (long long)N * rowPacks;
	for (long long u = (long long)blockIdx.x * blockDim.x + threadIdx.x; u < units; u += (long long)gridDim.x * blockDim.x) {
		long long r = u / rowPacks;
		int i = (int)(u % rowPacks) * GT_PACK;
		int n = gt_pack_len(i, I);
		float g[GT_PACK], v[GT_PACK], d[GT_PACK];
		gt_load8(inp, inp_dt, r * 2 * I + i, n, g);
		gt_load8(inp, inp_dt, r * 2 * I + I + i, n, v);
		gt_load8(dout, dout_dt, r * I + i, n, d);
#pragma unroll
		for (int k = 0; k < GT_PACK; k++) {
			float e = gt_silu_exp(g[k]);
			float sg = 1.0f / (1.0f + e);
			float es = e * sg; // 1−σ; e·σ ≤ 1 first: e alone may be ~1e38
			float du = d[k] * (g[k] * sg);
			d[k] = d[k] * v[k] * (sg * (1.0f + g[k] * es));
			v[k] = du;
		}
		gt_store8(dinp, dinp_dt, r * 2 * I + i, n, d);
		gt_store8(dinp, dinp_dt, r * 2 * I + I + i, n, v);
	}
}
