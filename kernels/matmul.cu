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
// per row, grid-stride, a thread per pack of the row (packed.cuh).
extern "C" __global__ void gt_matmul_epilogue(void *out, int out_dt, const float *acc, const void *bias, int bias_dt, int N, int OC) {
	for (long long r = blockIdx.x; r < N; r += gridDim.x) {
		long long base = r * OC;
		for (int o = threadIdx.x * GT_PACK; o < OC; o += blockDim.x * GT_PACK) {
			int n = gt_pack_len(o, OC);
			float v[GT_PACK], b[GT_PACK];
			if (acc == 0) {
				gt_load8(bias, bias_dt, o, n, v);
			} else {
				gt_load8(acc, GT_F32, base + o, n, v);
				if (bias != 0) {
					gt_load8(bias, bias_dt, o, n, b);
#pragma unroll
					for (int k = 0; k < GT_PACK; k++) {
						v[k] += b[k];
					}
				}
			}
			gt_store8(out, out_dt, base + o, n, v);
		}
	}
}

// gt_matmul_dbias_partial: partial[k·OC + o] = Σ dout[r,o] over the
// rows_per_chunk rows of chunk k = blockIdx.y, in row order. A thread sums
// one pack of columns; the grid's y covers every chunk and its
// x·blockDim.x every pack (checked by the launcher).
extern "C" __global__ void gt_matmul_dbias_partial(float *partial, const void *dout, int dout_dt, int N, int OC, int rows_per_chunk) {
	int o = (blockIdx.x * blockDim.x + threadIdx.x) * GT_PACK;
	if (o >= OC) {
		return;
	}
	int n = gt_pack_len(o, OC);
	long long k = blockIdx.y;
	long long r0 = k * rows_per_chunk;
	long long r1 = r0 + rows_per_chunk < N ? r0 + rows_per_chunk : N;
	float s[GT_PACK];
#pragma unroll
	for (int j = 0; j < GT_PACK; j++) {
		s[j] = 0.0f;
	}
	for (long long r = r0; r < r1; r++) {
		float d[GT_PACK];
		gt_load8(dout, dout_dt, r * OC + o, n, d);
#pragma unroll
		for (int j = 0; j < GT_PACK; j++) {
			s[j] += d[j];
		}
	}
	gt_store8(partial, GT_F32, k * OC + o, n, s);
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
