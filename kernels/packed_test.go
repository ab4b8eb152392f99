package kernels_test

import (
	"regexp"
	"testing"

	"github.com/gotrain/gotrain/kernels"
)

// packedKernels are the kernels that move their tensors in 16-byte packs
// (packed.cuh) and store packs; gt_sum_squares and gt_nonfinite load packs
// only.
func packedKernels() []string {
	return []string{
		"gt_add", "gt_scale", "gt_cast", "gt_gelu_forward", "gt_gelu_backward",
		"gt_layernorm_forward", "gt_layernorm_backward_dinp", "gt_layernorm_backward_partial",
		"gt_residual_layernorm_forward", "gt_matmul_epilogue", "gt_matmul_dbias_partial",
		"gt_rmsnorm_forward", "gt_residual_rmsnorm_forward", "gt_rmsnorm_backward_dinp",
		"gt_rmsnorm_backward_partial", "gt_swiglu_forward", "gt_swiglu_backward", "gt_adamw",
		"gt_sum_squares", "gt_nonfinite",
	}
}

// The pack helpers are only worth their branches if the compiler turns a
// pack into single 16-byte accesses: in the PTX NVRTC makes for sm_80,
// every vectorised kernel loads and stores with ld.v4 and st.v4 (global,
// or generic where the compiler did not prove the space: one 16-byte
// access either way).
func TestPackedKernelsUseVectorAccess(t *testing.T) {
	n := requireNVRTC(t)
	img, err := n.Compile(kernels.Program(), kernels.ProgramName, 80, kernels.PTX)
	if err != nil {
		t.Fatal(err)
	}
	ptx := string(img.Data)
	entry := regexp.MustCompile(`(?m)^\.visible \.entry ([A-Za-z0-9_]+)\(`)
	bodies := map[string]string{}
	locs := entry.FindAllStringSubmatchIndex(ptx, -1)
	for i, m := range locs {
		end := len(ptx)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		bodies[ptx[m[2]:m[3]]] = ptx[m[0]:end]
	}
	load := regexp.MustCompile(`\bld(\.global)?(\.nc)?\.v4\.`)
	store := regexp.MustCompile(`\bst(\.global)?\.v4\.`)
	for _, k := range packedKernels() {
		body, ok := bodies[k]
		if !ok {
			t.Errorf("%s: no entry in the PTX", k)
			continue
		}
		if !load.MatchString(body) {
			t.Errorf("%s: no 16-byte vector load (ld.v4) in its PTX", k)
		}
		if k == "gt_sum_squares" || k == "gt_nonfinite" {
			continue
		}
		if !store.MatchString(body) {
			t.Errorf("%s: no 16-byte vector store (st.v4) in its PTX", k)
		}
	}
}
