// packed.cuh: 16-byte vector access to float tensors (llm.c's Packed128),
// appended to the prelude. Memory-bound kernels move a pack of GT_PACK = 8
// consecutive elements per access: one 16-byte load or store for bf16 and
// fp16, two for fp32, instead of eight element accesses, each widened or
// rounded by the one template instantiation for its storage dtype.
//
// The dtype is a kernel argument, so gt_load8 and gt_store8 choose the
// instantiation once per pack (a branch every lane of a warp takes the same
// way), never per element. A pack is moved as a vector only when it is
// whole and its address is 16-byte aligned: Buffers are views at any
// element offset, so the last pack of a row or of a tensor, and every pack
// of a misaligned view, is moved element by element instead, with the same
// values and the same element-to-thread assignment. A kernel's bits do not
// depend on which way a pack went.

#define GT_PACK 8

// gt_u128 is one 16-byte word; its alignment lets the compiler emit a
// single ld.global.v4 / st.global.v4 for it.
struct __attribute__((aligned(16))) gt_u128 {
	unsigned int w[4];
};

// gt_misaligned fails an emulated launch on a misaligned vector access, as
// a GPU does (misaligned address), and the access is then skipped; on a
// GPU it is false and compiles away.
__device__ __forceinline__ bool gt_misaligned(const void *p) {
#ifdef GT_EMU_H
	if (((unsigned long long)p) & 15ull) {
		gt_emu_fail("misaligned 16-byte access at %p", p);
		return true;
	}
#endif
	return false;
}

__device__ __forceinline__ gt_u128 gt_ld128(const void *p) {
	GT_EMU_POINT();
	gt_u128 v = {{0u, 0u, 0u, 0u}};
	if (!gt_misaligned(p)) {
		v = *(const gt_u128 *)p;
	}
	return v;
}

__device__ __forceinline__ void gt_st128(void *p, gt_u128 v) {
	GT_EMU_POINT();
	if (!gt_misaligned(p)) {
		*(gt_u128 *)p = v;
	}
}

// gt_half_to_f32 and gt_f32_to_half convert one 16-bit element of dtype DT
// (GT_BF16 or GT_F16).
template <int DT> __device__ __forceinline__ float gt_half_to_f32(unsigned int h) {
	return DT == GT_BF16 ? gt_bf16_to_f32((unsigned short)h) : gt_f16_to_f32((unsigned short)h);
}

template <int DT> __device__ __forceinline__ unsigned int gt_f32_to_half(float f) {
	return DT == GT_BF16 ? gt_f32_to_bf16(f) : gt_f32_to_f16(f);
}

// gt_pack_load<DT> widens the aligned pack at p (DT storage) into v.
template <int DT> __device__ __forceinline__ void gt_pack_load(const void *p, float v[GT_PACK]) {
	if (DT == GT_F32) {
		gt_u128 lo = gt_ld128(p), hi = gt_ld128((const char *)p + 16);
#pragma unroll
		for (int k = 0; k < 4; k++) {
			v[k] = __uint_as_float(lo.w[k]);
			v[k + 4] = __uint_as_float(hi.w[k]);
		}
	} else {
		// Little-endian: element 2k is the low half of word k.
		gt_u128 u = gt_ld128(p);
#pragma unroll
		for (int k = 0; k < 4; k++) {
			v[2 * k] = gt_half_to_f32<DT>(u.w[k] & 0xffffu);
			v[2 * k + 1] = gt_half_to_f32<DT>(u.w[k] >> 16);
		}
	}
}

// gt_pack_store<DT> rounds v to DT (nearest even) into the aligned pack at p.
template <int DT> __device__ __forceinline__ void gt_pack_store(void *p, const float v[GT_PACK]) {
	if (DT == GT_F32) {
		gt_u128 lo, hi;
#pragma unroll
		for (int k = 0; k < 4; k++) {
			lo.w[k] = __float_as_uint(v[k]);
			hi.w[k] = __float_as_uint(v[k + 4]);
		}
		gt_st128(p, lo);
		gt_st128((char *)p + 16, hi);
	} else {
		gt_u128 u;
#pragma unroll
		for (int k = 0; k < 4; k++) {
			u.w[k] = gt_f32_to_half<DT>(v[2 * k]) | (gt_f32_to_half<DT>(v[2 * k + 1]) << 16);
		}
		gt_st128(p, u);
	}
}

// gt_pack_at is the address of element i of a dtype-dt buffer when the
// n elements from i form a whole, 16-byte aligned pack, else null.
__device__ __forceinline__ const char *gt_pack_at(const void *p, int dt, long long i, int n) {
	const char *a = (const char *)p + i * (dt == GT_F32 ? 4 : 2);
	return n == GT_PACK && (((unsigned long long)a) & 15ull) == 0 ? a : 0;
}

// gt_load8 reads elements [i, i+n) of p (dtype dt, 0 < n ≤ GT_PACK) as
// fp32 into v[0..n) and zeroes the rest of v.
__device__ __forceinline__ void gt_load8(const void *p, int dt, long long i, int n, float v[GT_PACK]) {
	const char *a = gt_pack_at(p, dt, i, n);
	if (a != 0) {
		if (dt == GT_BF16) {
			gt_pack_load<GT_BF16>(a, v);
		} else if (dt == GT_F16) {
			gt_pack_load<GT_F16>(a, v);
		} else {
			gt_pack_load<GT_F32>(a, v);
		}
		return;
	}
#pragma unroll
	for (int k = 0; k < GT_PACK; k++) {
		v[k] = k < n ? gt_load(p, dt, i + k) : 0.0f;
	}
}

// gt_store8 writes v[0..n) to elements [i, i+n) of p (dtype dt), rounded
// to nearest even for 16-bit dtypes.
__device__ __forceinline__ void gt_store8(void *p, int dt, long long i, int n, const float v[GT_PACK]) {
	const char *a = gt_pack_at(p, dt, i, n);
	if (a != 0) {
		if (dt == GT_BF16) {
			gt_pack_store<GT_BF16>((void *)a, v);
		} else if (dt == GT_F16) {
			gt_pack_store<GT_F16>((void *)a, v);
		} else {
			gt_pack_store<GT_F32>((void *)a, v);
		}
		return;
	}
#pragma unroll
	for (int k = 0; k < GT_PACK; k++) {
		if (k < n) {
			gt_store(p, dt, i + k, v[k]);
		}
	}
}

// gt_pack_len is how many elements the pack starting at i holds when a
// row or tensor has n: GT_PACK, or fewer for the last one.
__device__ __forceinline__ int gt_pack_len(long long i, long long n) {
	return n - i < GT_PACK ? (int)(n - i) : GT_PACK;
}
