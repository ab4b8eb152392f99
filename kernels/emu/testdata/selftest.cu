// Kernels that exercise each part of the emulated execution model. The
// tests compute what a GPU must produce and compare.

// out[linear global thread] = its (blockIdx, threadIdx) packed in decimal.
extern "C" __global__ void emu_ids(int *out) {
	int tx = threadIdx.x, ty = threadIdx.y, tz = threadIdx.z;
	int bx = blockIdx.x, by = blockIdx.y, bz = blockIdx.z;
	int tpb = blockDim.x * blockDim.y * blockDim.z;
	int block = (bz * gridDim.y + by) * gridDim.x + bx;
	int t = (tz * blockDim.y + ty) * blockDim.x + tx;
	out[block * tpb + t] = ((((bz * 10 + by) * 10 + bx) * 10 + tz) * 10 + ty) * 10 + tx;
}

// Reverses each block's slice through shared memory: every thread must see
// the others' writes after the barrier.
extern "C" __global__ void emu_reverse(float *x, int n) {
	__shared__ float s[256];
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	int valid = min((int)blockDim.x, n - (int)(blockIdx.x * blockDim.x));
	if (threadIdx.x < valid) {
		s[threadIdx.x] = x[i];
	}
	__syncthreads();
	if (threadIdx.x < valid) {
		x[i] = s[valid - 1 - threadIdx.x];
	}
}

// Block sums via the prelude's shuffle-and-shared reduction.
extern "C" __global__ void emu_block_sum(float *out, const float *x, int n) {
	float v = 0.0f;
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		v += x[blockIdx.x * n + i];
	}
	float s = gt_block_sum(v);
	float m = gt_block_max(v);
	if (threadIdx.x == 0) {
		out[2 * blockIdx.x] = s;
		out[2 * blockIdx.x + 1] = m;
	}
}

// Every shuffle flavour with a width, and the votes.
extern "C" __global__ void emu_shuffles(int *out, int width) {
	int lane = threadIdx.x % 32;
	int t = blockIdx.x * blockDim.x + threadIdx.x;
	int v = 100 * (int)threadIdx.x;
	out[8 * t + 0] = __shfl_xor_sync(0xffffffffu, v, 5, width);
	out[8 * t + 1] = __shfl_down_sync(0xffffffffu, v, 3, width);
	out[8 * t + 2] = __shfl_up_sync(0xffffffffu, v, 2, width);
	out[8 * t + 3] = __shfl_sync(0xffffffffu, v, 7, width);
	out[8 * t + 4] = (int)__ballot_sync(0xffffffffu, lane % 3 == 0);
	out[8 * t + 5] = __any_sync(0xffffffffu, lane == 31);
	out[8 * t + 6] = __all_sync(0xffffffffu, lane < 31);
	double d = __shfl_xor_sync(0xffffffffu, 0.5 * (double)v, 1);
	out[8 * t + 7] = (int)(2.0 * d);
}

// Atomics: a histogram of i % bins over n values, and a CAS-built max.
extern "C" __global__ void emu_atomics(int *hist, int bins, unsigned *casmax, float *fsum, int n) {
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		atomicAdd(&hist[i % bins], 1);
		unsigned v = (unsigned)((i * 7919) % 1000);
		unsigned old = *casmax;
		while (old < v) {
			unsigned prev = atomicCAS(casmax, old, v);
			if (prev == old) {
				break;
			}
			old = prev;
		}
		atomicAdd(fsum, 1.0f);
	}
}

// A warp where lane 0 waits at __syncthreads while the others shuffle:
// a deadlock on a GPU.
extern "C" __global__ void emu_deadlock(int *out) {
	if (threadIdx.x == 0) {
		__syncthreads();
	} else {
		out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 1);
	}
}

// Threads of one block meet at two different __syncthreads calls.
extern "C" __global__ void emu_divergent_sync(int *out) {
	if (threadIdx.x < 16) {
		__syncthreads();
		out[threadIdx.x] = 1;
	} else {
		__syncthreads();
		out[threadIdx.x] = 2;
	}
}

// A 48-thread block shuffling: lanes 16..31 of the second warp do not
// exist, so lane 15 reading lane 16 is undefined.
extern "C" __global__ void emu_partial_warp(int *out) {
	out[threadIdx.x] = __shfl_down_sync(0xffffffffu, (int)threadIdx.x, 1);
}

// The bf16/fp16 conversions of the prelude, for every input given.
extern "C" __global__ void emu_convert(unsigned short *bf, unsigned short *h, float *back, const float *x, int n) {
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
		bf[i] = gt_f32_to_bf16(x[i]);
		h[i] = gt_f32_to_f16(x[i]);
		back[2 * i] = gt_bf16_to_f32(bf[i]);
		back[2 * i + 1] = gt_f16_to_f32(h[i]);
	}
}

// Barriers and shuffles in a loop: what an emulated launch costs per
// thread switch (the benchmark's subject).
extern "C" __global__ void emu_barriers(int *out, int iters) {
	int v = threadIdx.x;
	for (int i = 0; i < iters; i++) {
		__syncthreads();
		v += __shfl_xor_sync(0xffffffffu, v, 1) & 1;
	}
	out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

// A race: thread i reads what thread i-1 writes, with no barrier between
// the write and the read. On a GPU the answer depends on timing.
extern "C" __global__ void emu_racy(int *out) {
	__shared__ int s[64];
	s[threadIdx.x] = 0;
	__syncthreads();
	s[threadIdx.x] = (int)threadIdx.x + 1;
	out[threadIdx.x] = threadIdx.x > 0 ? s[threadIdx.x - 1] : 0;
}

// A lost update: every thread adds 1 to x[0] with a plain read and write.
// Run one thread at a time the sum is exact; interleaved it is not.
extern "C" __global__ void emu_lost_update(float *x) {
	float v = gt_load(x, GT_F32, 0);
	gt_store(x, GT_F32, 0, v + 1.0f);
}
