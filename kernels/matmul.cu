// matmul.cu: the parts of a fully connected layer that are not a GEMM
// (cuBLAS computes those): the bias epilogue of the forward pass and the
// bias gradient, a column sum of dout (N,OC) over its N rows.
//
// The bias gradient is deterministic without float atomics: one kernel
// writes per-chunk column sums (one thread per column and chunk of rows,
// rows in order), a second adds the chunks in order onto dbias, which is
// therefore loaded and rounded once.

// gt_matmul_epilogue: out[r,o] = acc[r,o] + bias[o] for N rows of OC,
// rounded once to out's dtype. acc is the GEMM's fp32 result and may be
// out itself when out is F32; a null acc writes the bias alone (a bias
// pre-filled for a GEMM with beta = 1), a null bias adds nothing. One block
// per row, grid-stride, threads across the row.
extern "C" __global__ void gt_matmul_epilogue(void *out, int out_dt, const float *acc, const void *bias, int bias_dt, int N, int OC) {
	for (long long r = blockIdx.x; r < N; r += gridDim.x) {
		long long base = r * OC;
		for (int o = threadIdx.x; o < OC; o += blockDim.x) {
			float v;
			if (acc == 0) {
				v = gt_load(bias, bias_dt, o);
			} else if (bias == 0) {
				v = acc[base + o];
			} else {
				v = acc[base + o] + gt_load(bias, bias_dt, o);
			}
			gt_store(out, out_dt, base + o, v);
		}
	}
}

// gt_matmul_dbias_partial: partial[k·OC + o] = Σ dout[r,o] over the
// rows_per_chunk rows of chunk k = blockIdx.y, in row order. The grid's y
// covers every chunk and its x·blockDim.x every column (checked by the
// launcher).
extern "C" __global__ void gt_matmul_dbias_partial(float *partial, const void *dout, int dout_dt, int N, int OC, int rows_per_chunk) {
	int o = blockIdx.x * blockDim.x + threadIdx.x;
	if (o >= OC) {
		return;
	}
	long long k = blockIdx.y;
	long long r0 = k * rows_per_chunk;
	long long r1 = r0 + rows_per_chunk < N ? r0 + rows_per_chunk : N;
	float s = 0.0f;
	for (long long r = r0; r < r1; r++) {
		s += gt_load(dout, dout_dt, r * OC + o);
	}
	partial[k * OC + o] = s;
}

// gt_matmul_dbias_reduce: dbias[o] += Σ_k partial[k·OC + o], chunks in
// order; one thread per column.
extern "C" __global__ void gt_matmul_dbias_reduce(void *dbias, int dbias_dt, const float *partial, int chunks, int OC) {
	for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < OC; o += gridDim.x * blockDim.x) {
		float s = gt_load(dbias, dbias_dt, o);
		for (long long k = 0; k < chunks; k++) {
			s += partial[k * OC + o];
		}
		gt_store(dbias, dbias_dt, o, s);
	}
}
