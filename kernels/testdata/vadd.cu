// The kernel the tests compile with NVRTC; the mock CUDA driver runs a CPU
// version of it by name (cudatest.KernelVAdd). Plain CUDA C, no headers.
extern "C" __global__ void gt_test_vadd(float *c, const float *a, const float *b, unsigned n) {
	unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		c[i] = a[i] + b[i];
	}
}
