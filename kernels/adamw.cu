// adamw.cu: the AdamW update, elementwise over n parameters (grid-stride).
// param and grad in any float dtype; master (optional), m and v F32.

// gt_adamw updates m, v and the weights as torch.optim.AdamW does, in the
// CPU backend's order of operations: g = grad·grad_scale,
// m = β1·m + (1−β1)·g, v = β2·v + (1−β2)·g·g, w −= lr·(m/bc1 / (√(v/bc2) + eps)
// + wd·w), with the bias corrections bc1 = 1−β1^step and bc2 = 1−β2^step
// computed once on the host. With a master (non-null) the weights are the
// master copy and param receives them rounded to its dtype; without one
// the weights are param itself.
extern "C" __global__ void gt_adamw(void *param, int param_dt, float *master, const void *grad, int grad_dt, float *m, float *v, long long n, float lr, float beta1, float beta2, float eps, float wd, float grad_scale, float bc1, float bc2) {
	long long stride = (long long)gridDim.x * blockDim.x;
	for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
		float g = gt_load(grad, grad_dt, i) * grad_scale;
		float mi = beta1 * m[i] + (1.0f - beta1) * g;
		float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
		m[i] = mi;
		v[i] = vi;
		float w = master ? master[i] : gt_load(param, param_dt, i);
		float mh = mi / bc1;
		float vh = vi / bc2;
		w -= lr * (mh / (sqrtf(vh) + eps) + wd * w);
		if (master) {
			master[i] = w;
		}
		gt_store(param, param_dt, i, w);
	}
}
