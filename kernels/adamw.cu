// adamw.cu: the AdamW update, elementwise over n parameters, a pack of
// GT_PACK per thread (packed.cuh), grid-stride. param and grad in any float
// dtype; master (optional), m and v F32.

// gt_adamw updates m, v and the weights as torch.optim.AdamW does, in the
// CPU backend's order of operations: g = grad·grad_scale,
// m = β1·m + (1−β1)·g, v = β2·v + (1−β2)·g·g, w −= lr·(m/bc1 / (√(v/bc2) + eps)
// + wd·w), with the bias corrections bc1 = 1−β1^step and bc2 = 1−β2^step
// computed once on the host. With a master (non-null) the weights are the
// master copy and param receives them rounded to its dtype; without one
// the weights are param itself.
extern "C" __global__ void gt_adamw(void *param, int param_dt, float *master, const void *grad, int grad_dt, float *m, float *v, long long n, float lr, float beta1, float beta2, float eps, float wd, float grad_scale, float bc1, float bc2) {
	long long stride = (long long)gridDim.x * blockDim.x * GT_PACK;
	for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * GT_PACK; i < n; i += stride) {
		int k = gt_pack_len(i, n);
		float g[GT_PACK], mi[GT_PACK], vi[GT_PACK], w[GT_PACK];
		gt_load8(grad, grad_dt, i, k, g);
		gt_load8(m, GT_F32, i, k, mi);
		gt_load8(v, GT_F32, i, k, vi);
		if (master) {
			gt_load8(master, GT_F32, i, k, w);
		} else {
			gt_load8(param, param_dt, i, k, w);
		}
#pragma unroll
		for (int j = 0; j < GT_PACK; j++) {
			float gj = g[j] * grad_scale;
			mi[j] = beta1 * mi[j] + (1.0f - beta1) * gj;
			vi[j] = beta2 * vi[j] + (1.0f - beta2) * gj * gj;
			float mh = mi[j] / bc1;
			float vh = vi[j] / bc2;
			w[j] -= lr * (mh / (sqrtf(vh) + eps) + wd * w[j]);
		}
		gt_store8(m, GT_F32, i, k, mi);
		gt_store8(v, GT_F32, i, k, vi);
		if (master) {
			gt_store8(master, GT_F32, i, k, w);
		}
		gt_store8(param, param_dt, i, k, w);
	}
}
