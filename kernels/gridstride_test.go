package kernels_test

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/gotrain/gotrain/kernels"
	"github.com/gotrain/gotrain/kernels/emu"
)

// Launchers cap their grids and the kernels walk the rest grid-stride, so
// a kernel's result must not depend on its grid: each kernel below runs
// once with a grid covering its work and once with a single block, from
// identical inputs, and every output must match bit for bit. (Whether the
// results are right is the backend suites' concern; this checks the loops
// that a capped grid relies on.)
func TestResultsDoNotDependOnGrid(t *testing.T) {
	lib := emu.ForTest(t)
	const (
		N, C, T = 37, 45, 9
		n       = 1000
	)
	f32, bf16 := int32(kernels.F32), int32(kernels.BF16)
	cases := []struct {
		kernel string
		block  uint32
		grid   uint32 // a grid that covers the work
		sizes  []int  // float32 buffers, random contents; a negative size -s is s ids in [0, 7)
		outs   []int  // buffers compared
		args   func(m []*emu.Mem) []any
	}{
		{"gt_add", 256, 4, []int{n, n, n}, []int{0},
			func(m []*emu.Mem) []any { return []any{m[0], f32, m[1], f32, m[2], f32, int64(n)} }},
		{"gt_scale", 256, 4, []int{n}, []int{0},
			func(m []*emu.Mem) []any { return []any{m[0], f32, float32(-0.3), int64(n)} }},
		{"gt_cast", 256, 4, []int{n, n}, []int{0},
			func(m []*emu.Mem) []any { return []any{m[0], bf16, m[1], f32, int64(n)} }},
		{"gt_gelu_forward", 256, 4, []int{n, n}, []int{0},
			func(m []*emu.Mem) []any { return []any{m[0], f32, m[1], f32, int64(n)} }},
		{"gt_gelu_backward", 256, 4, []int{n, n, n}, []int{0},
			func(m []*emu.Mem) []any { return []any{m[0], f32, m[1], f32, m[2], f32, int64(n)} }},
		{"gt_encoder_forward", 64, N, []int{N * C, -N, 7 * C, T * C}, []int{0},
			func(m []*emu.Mem) []any {
				return []any{m[0], f32, m[1], m[2], f32, m[3], f32, int32(N), int32(T), int32(C), int32(7)}
			}},
		{"gt_encoder_backward_wpe", 64, T, []int{T * C, 4 * T * C}, []int{0},
			func(m []*emu.Mem) []any { return []any{m[0], f32, m[1], f32, int32(4), int32(T), int32(C)} }},
		{"gt_layernorm_forward", 128, (N + 3) / 4, []int{N * C, N, N, N * C, C, C}, []int{0, 1, 2},
			func(m []*emu.Mem) []any {
				return []any{m[0], f32, m[1], m[2], m[3], f32, m[4], f32, m[5], f32, int32(N), int32(C)}
			}},
		{"gt_layernorm_backward_dinp", 128, (N + 3) / 4, []int{N * C, N * C, N * C, C, N, N}, []int{0},
			func(m []*emu.Mem) []any {
				return []any{m[0], f32, m[1], f32, m[2], f32, m[3], f32, m[4], m[5], int32(N), int32(C)}
			}},
		{"gt_layernorm_backward_reduce", 32, 2, []int{C, C, 2 * 3 * C}, []int{0, 1},
			func(m []*emu.Mem) []any { return []any{m[0], f32, m[1], f32, m[2], int32(3), int32(C)} }},
		{"gt_matmul_epilogue", 64, N, []int{N * C, N * C, C}, []int{0},
			func(m []*emu.Mem) []any { return []any{m[0], bf16, m[1], m[2], f32, int32(N), int32(C)} }},
		{"gt_matmul_dbias_reduce", 32, 2, []int{C, 3 * C}, []int{0},
			func(m []*emu.Mem) []any { return []any{m[0], f32, m[1], int32(3), int32(C)} }},
		{"gt_rmsnorm_forward", 128, (N + 3) / 4, []int{N * C, N, N * C, C}, []int{0, 1},
			func(m []*emu.Mem) []any {
				return []any{m[0], bf16, m[1], m[2], f32, m[3], bf16, int32(N), int32(C), float32(1e-5)}
			}},
		{"gt_residual_rmsnorm_forward", 128, (N + 3) / 4, []int{N * C, N * C, N, N * C, N * C, C}, []int{0, 1, 2},
			func(m []*emu.Mem) []any {
				return []any{m[0], f32, m[1], bf16, m[2], m[3], f32, m[4], f32, m[5], f32, int32(N), int32(C), float32(1e-6)}
			}},
		{"gt_rmsnorm_backward_dinp", 128, (N + 3) / 4, []int{N * C, N * C, N * C, C, N}, []int{0},
			func(m []*emu.Mem) []any {
				return []any{m[0], f32, m[1], f32, m[2], f32, m[3], f32, m[4], int32(N), int32(C)}
			}},
		// Rotary: NH = 3, KV = 1, HD = 6 over N tokens of T positions; the
		// forward with Qwen3's norms, the backward with and without them.
		{"gt_qkv_rotary_forward", 128, (N*5 + 3) / 4, []int{N * 30, N * 4, N * 30, 6, 6, T * 3, T * 3}, []int{0, 1},
			func(m []*emu.Mem) []any {
				return []any{m[0], f32, m[1], m[2], f32, m[3], f32, m[4], bf16, m[5], m[6],
					int32(N), int32(T), int32(3), int32(1), int32(6), float32(1e-6)}
			}},
		{"gt_qkv_rotary_backward", 128, (N*5 + 3) / 4, []int{N * 30, N * 30, N * 30, 6, 6, N * 4, T * 3, T * 3}, []int{0},
			func(m []*emu.Mem) []any {
				return []any{m[0], f32, m[1], f32, m[2], f32, m[3], f32, m[4], f32, m[5], m[6], m[7],
					int32(N), int32(T), int32(3), int32(1), int32(6)}
			}},
		{"gt_qkv_rotary_backward", 128, (N*5 + 3) / 4, []int{N * 30, N * 30, T * 3, T * 3}, []int{0},
			func(m []*emu.Mem) []any {
				null := uint64(0)
				return []any{m[0], bf16, m[1], f32, null, f32, null, f32, null, f32, null, m[2], m[3],
					int32(N), int32(T), int32(3), int32(1), int32(6)}
			}},
		{"gt_swiglu_forward", 256, 7, []int{N * C, 2 * N * C}, []int{0},
			func(m []*emu.Mem) []any { return []any{m[0], bf16, m[1], f32, int32(N), int32(C)} }},
		{"gt_swiglu_backward", 256, 7, []int{2 * N * C, N * C, 2 * N * C}, []int{0},
			func(m []*emu.Mem) []any { return []any{m[0], f32, m[1], f32, m[2], f32, int32(N), int32(C)} }},
	}
	for _, tc := range cases {
		t.Run(tc.kernel, func(t *testing.T) {
			run := func(grid uint32) [][]byte {
				r := rand.New(rand.NewPCG(3, 4))
				mems := make([]*emu.Mem, len(tc.sizes))
				for i, s := range tc.sizes {
					if s < 0 {
						ids := make([]int32, -s)
						for j := range ids {
							ids[j] = int32(r.IntN(7))
						}
						mems[i] = int32Mem(ids)
					} else {
						v := make([]float32, s)
						for j := range v {
							v[j] = float32(r.NormFloat64())
						}
						mems[i] = float32Mem(v)
					}
					defer mems[i].Free()
				}
				if err := lib.Launch(tc.kernel, emu.Dim{X: grid}, emu.Dim{X: tc.block}, tc.args(mems)...); err != nil {
					t.Fatal(err)
				}
				var outs [][]byte
				for _, o := range tc.outs {
					outs = append(outs, bytes.Clone(mems[o].Bytes()))
				}
				return outs
			}
			full, one := run(tc.grid), run(1)
			for i := range full {
				if !bytes.Equal(full[i], one[i]) {
					t.Errorf("output %d differs between a %d-block grid and a single block", tc.outs[i], tc.grid)
				}
			}
		})
	}
}
