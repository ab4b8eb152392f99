// prelude.cuh: what every gotrain kernel source may use. It is prepended to
// the kernel sources for NVRTC and included after csrc/gt_emu.h by the CPU
// emulation, so it is CUDA C++ without any header: only builtin types and
// the intrinsics both compilers provide.
//
// Storage dtypes are backend.DType's values. 16-bit floats travel as raw
// unsigned short and convert exactly as backend.BF16FromF32/F16FromF32 do
// (round to nearest even, NaN kept quiet), so a GPU result rounds the same
// fp32 value to the same bits as the CPU backend.

// GT_EMU_POINT marks a global-memory access: nothing on a GPU; under the
// CPU emulation's interleaving schedule, a point where another thread may
// run (csrc/gt_emu.h).
#ifndef GT_EMU_POINT
#define GT_EMU_POINT()
#endif

#define GT_F32 1
#define GT_BF16 2
#define GT_F16 3
#define GT_I32 4
#define GT_U16 5

#define GT_WARP 32
#define GT_INF __int_as_float(0x7f800000)
#define GT_NEG_INF __int_as_float((int)0xff800000u)
#define GT_FULL_MASK 0xffffffffu

__device__ __forceinline__ float gt_bf16_to_f32(unsigned short h) {
	return __uint_as_float(((unsigned int)h) << 16);
}

__device__ __forceinline__ unsigned short gt_f32_to_bf16(float f) {
	unsigned int u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) {
		return (unsigned short)((u >> 16) | 0x0040u);
	}
	u += 0x7fffu + ((u >> 16) & 1u);
	return (unsigned short)(u >> 16);
}

__device__ __forceinline__ float gt_f16_to_f32(unsigned short h) {
	unsigned int sign = ((unsigned int)h & 0x8000u) << 16;
	unsigned int exp = ((unsigned int)h >> 10) & 0x1fu;
	unsigned int man = (unsigned int)h & 0x3ffu;
	if (exp == 0x1fu) {
		return __uint_as_float(sign | 0x7f800000u | (man << 13));
	}
	if (exp == 0) {
		// Subnormal or zero: man * 2^-24, exact in fp32.
		float f = (float)man * (1.0f / 16777216.0f);
		return sign ? -f : f;
	}
	return __uint_as_float(sign | ((exp + 127u - 15u) << 23) | (man << 13));
}

__device__ __forceinline__ unsigned short gt_f32_to_f16(float f) {
	unsigned int u = __float_as_uint(f);
	unsigned int sign = (u >> 16) & 0x8000u;
	int exp = (int)((u >> 23) & 0xffu);
	unsigned int man = u & 0x7fffffu;
	if (exp == 0xff) {
		return (unsigned short)(sign | (man ? 0x7e00u : 0x7c00u));
	}
	if (exp > 127 + 15) {
		return (unsigned short)(sign | 0x7c00u);
	}
	int e = exp - 127 + 15;
	if (e <= 0) {
		if (e < -10) {
			return (unsigned short)sign;
		}
		unsigned int m = man | 0x800000u;
		unsigned int shift = (unsigned int)(14 - e);
		unsigned int half = m >> shift;
		unsigned int rem = m & ((1u << shift) - 1u);
		unsigned int mid = 1u << (shift - 1u);
		if (rem > mid || (rem == mid && (half & 1u))) {
			half++;
		}
		return (unsigned short)(sign | half);
	}
	unsigned int half = ((unsigned int)e << 10) | (man >> 13);
	unsigned int rem = man & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) {
		half++; // a carry into the exponent is the right answer, up to Inf
	}
	return (unsigned short)(sign | half);
}

// gt_load reads element i of a float buffer of dtype dt as fp32.
__device__ __forceinline__ float gt_load(const void *p, int dt, long long i) {
	GT_EMU_POINT();
	if (dt == GT_BF16) {
		return gt_bf16_to_f32(((const unsigned short *)p)[i]);
	}
	if (dt == GT_F16) {
		return gt_f16_to_f32(((const unsigned short *)p)[i]);
	}
	return ((const float *)p)[i];
}

// gt_round is what storing v in dtype dt and reading it back gives.
__device__ __forceinline__ float gt_round(int dt, float v) {
	if (dt == GT_BF16) {
		return gt_bf16_to_f32(gt_f32_to_bf16(v));
	}
	if (dt == GT_F16) {
		return gt_f16_to_f32(gt_f32_to_f16(v));
	}
	return v;
}

// gt_store writes v, rounded to nearest even for 16-bit dtypes.
__device__ __forceinline__ void gt_store(void *p, int dt, long long i, float v) {
	GT_EMU_POINT();
	if (dt == GT_BF16) {
		((unsigned short *)p)[i] = gt_f32_to_bf16(v);
	} else if (dt == GT_F16) {
		((unsigned short *)p)[i] = gt_f32_to_f16(v);
	} else {
		((float *)p)[i] = v;
	}
}

// Warp reductions: every lane of a full warp must call them; every lane
// gets the result. The xor butterfly combines in the same order on every
// lane, so all lanes hold identical bits.
struct gt_op_sum {
	template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct gt_op_max {
	__device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <typename T, typename Op> __device__ __forceinline__ T gt_warp_reduce(T v, Op op) {
	for (int m = GT_WARP / 2; m > 0; m >>= 1) {
		v = op(v, __shfl_xor_sync(GT_FULL_MASK, v, m));
	}
	return v;
}

__device__ __forceinline__ float gt_warp_sum(float v) { return gt_warp_reduce(v, gt_op_sum()); }
__device__ __forceinline__ double gt_warp_sum_f64(double v) { return gt_warp_reduce(v, gt_op_sum()); }
__device__ __forceinline__ float gt_warp_max(float v) { return gt_warp_reduce(v, gt_op_max()); }

// Block reductions over a one-dimensional block whose size is a multiple of
// 32 (at most 1024): every thread must call them, every thread gets the
// result (identity fills the lanes past the last warp). They begin and end
// with a barrier, so calls may follow each other and the shared scratch
// (one array per instantiation) is free again on return.
template <typename T, typename Op> __device__ __forceinline__ T gt_block_reduce(T v, T identity, Op op) {
	__shared__ T gt_scratch[GT_WARP];
	int lane = threadIdx.x % GT_WARP;
	int warp = threadIdx.x / GT_WARP;
	int warps = blockDim.x / GT_WARP;
	v = gt_warp_reduce(v, op);
	__syncthreads();
	if (lane == 0) {
		gt_scratch[warp] = v;
	}
	__syncthreads();
	v = lane < warps ? gt_scratch[lane] : identity;
	v = gt_warp_reduce(v, op);
	__syncthreads();
	return v;
}

__device__ __forceinline__ float gt_block_sum(float v) { return gt_block_reduce(v, 0.0f, gt_op_sum()); }
__device__ __forceinline__ double gt_block_sum_f64(double v) { return gt_block_reduce(v, 0.0, gt_op_sum()); }
__device__ __forceinline__ float gt_block_max(float v) { return gt_block_reduce(v, GT_NEG_INF, gt_op_max()); }
