// encoder.cu: token and position embeddings, forward and backward.
// B = batch, T = sequence length, C = channels, V = rows of wte; inp is
// I32 (B,T) token ids, wte (V,C), wpe (at least T rows of C, or null for
// models without learned positions), out and dout (B,T,C).
//
// Backward without float atomics: dwpe has one thread per (t, c) summing
// over b in order. dwte rows repeat when a token does, so positions are
// first grouped by token (gt_encoder_group: a stable ranking by (id,
// position)), then one thread per (group, c) adds the group's dout rows in
// position order to the dwte row, loaded and stored once: the same sums,
// in the same order, with the same single rounding per row as the CPU
// backend. Kernels that walk rows do so grid-stride over blockIdx.x with
// the block's threads across c, so any grid is correct.

// GT_ENC_GROUP_THREADS is gt_encoder_group's block size (its id tile).
#define GT_ENC_GROUP_THREADS 256

// gt_encoder_forward: out[bt] = wte[inp[bt]] + wpe[bt % T], or wte[inp[bt]]
// when wpe is null (no learned positions). A token id outside [0, V) gives
// a row of NaN instead of a read out of bounds.
extern "C" __global__ void gt_encoder_forward(void *out, int out_dt, const int *inp, const void *wte, int wte_dt, const void *wpe, int wpe_dt, int BT, int T, int C, int V) {
	for (int bt = blockIdx.x; bt < BT; bt += gridDim.x) {
		int id = inp[bt];
		long long o = (long long)bt * C;
		long long e = (long long)id * C;
		long long p = (long long)(bt % T) * C;
		bool ok = id >= 0 && id < V;
		for (int c = threadIdx.x; c < C; c += blockDim.x) {
			float pos = wpe != 0 ? gt_load(wpe, wpe_dt, p + c) : 0.0f;
			float v = ok ? gt_load(wte, wte_dt, e + c) + pos : __int_as_float(0x7fc00000);
			gt_store(out, out_dt, o + c, v);
		}
	}
}

// gt_encoder_group ranks the n positions by (token id, position): order
// (n) lists the positions sorted that way, and groups (2n) holds for
// position p the start of its token's run in order and the run's length
// when p is the token's first occurrence, and (-1, length) otherwise. Each
// thread ranks one position by comparing its id with every id, read in
// tiles through shared memory: O(n²) integer compares (6.7e7 for B·T =
// 8192) in one launch, with no atomics and no multi-pass sort, and the
// same result on every run. Requires GT_ENC_GROUP_THREADS threads.
extern "C" __global__ void gt_encoder_group(int *order, int *groups, const int *inp, int n) {
	__shared__ int tile[GT_ENC_GROUP_THREADS];
	for (long long p0 = (long long)blockIdx.x * GT_ENC_GROUP_THREADS; p0 < n; p0 += (long long)gridDim.x * GT_ENC_GROUP_THREADS) {
		int p = (int)p0 + threadIdx.x;
		int id = p < n ? inp[p] : 0;
		int less = 0, before = 0, same = 0;
		for (int q0 = 0; q0 < n; q0 += GT_ENC_GROUP_THREADS) {
			__syncthreads();
			if (q0 + threadIdx.x < n) {
				tile[threadIdx.x] = inp[q0 + threadIdx.x];
			}
			__syncthreads();
			int m = min(GT_ENC_GROUP_THREADS, n - q0);
			for (int j = 0; j < m; j++) {
				int q = tile[j];
				less += q < id;
				if (q == id) {
					same++;
					before += q0 + j < p;
				}
			}
		}
		if (p < n) {
			order[less + before] = p;
			groups[2LL * p] = before == 0 ? less : -1;
			groups[2LL * p + 1] = same;
		}
	}
}

// gt_encoder_backward_wte: dwte[id] += Σ dout[p] over the positions p of
// each token id, in position order, from gt_encoder_group's order and
// groups. One block per first occurrence; other positions' blocks return.
// Ids outside [0, V) are skipped.
extern "C" __global__ void gt_encoder_backward_wte(void *dwte, int dwte_dt, const void *dout, int dout_dt, const int *inp, const int *order, const int *groups, int n, int C, int V) {
	for (int p = blockIdx.x; p < n; p += gridDim.x) {
		int start = groups[2LL * p];
		int id = inp[p];
		if (start < 0 || id < 0 || id >= V) {
			continue;
		}
		int end = start + groups[2LL * p + 1];
		long long row = (long long)id * C;
		for (int c = threadIdx.x; c < C; c += blockDim.x) {
			float acc = gt_load(dwte, dwte_dt, row + c);
			for (int g = start; g < end; g++) {
				acc += gt_load(dout, dout_dt, (long long)order[g] * C + c);
			}
			gt_store(dwte, dwte_dt, row + c, acc);
		}
	}
}

// gt_encoder_backward_wpe: dwpe[t] += Σ_b dout[b,t], b in order; one block
// per position t.
extern "C" __global__ void gt_encoder_backward_wpe(void *dwpe, int dwpe_dt, const void *dout, int dout_dt, int B, int T, int C) {
	for (int t = blockIdx.x; t < T; t += gridDim.x) {
		long long row = (long long)t * C;
		for (int c = threadIdx.x; c < C; c += blockDim.x) {
			float acc = gt_load(dwpe, dwpe_dt, row + c);
			for (int b = 0; b < B; b++) {
				acc += gt_load(dout, dout_dt, ((long long)b * T + t) * C + c);
			}
			gt_store(dwpe, dwpe_dt, row + c, acc);
		}
	}
}
