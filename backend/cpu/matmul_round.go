package cpu

import (
	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/blas"
)

// matmulRounded runs MatmulForward as one BgemmRound when out, inp and
// weight are all BF16 and the GEMM rounds bf16 products itself: each tile
// is rounded as it is finished, so the fp32 output (gpt2-tiny's logits: 51
// MB a 256-row chunk, 412 MB a step at B8 T256) is neither written nor read
// back to be narrowed. The bits are those of the fp32 path then narrow. It reports false, having
// done nothing, where that path must run.
func (be *Backend) matmulRounded(out, inp, weight, bias backend.Buffer, N, C, OC int) bool {
	const op = "MatmulForward"
	if out.DType() != backend.BF16 || N == 0 || C == 0 || OC == 0 {
		return false
	}
	r, ok := be.bgemm.(blas.BF16Rounder)
	if !ok {
		return false
	}
	x16, w16, ok := be.bf16Pair(op, inp, weight)
	if !ok {
		return false
	}
	var b []float32
	if !bias.IsNil() {
		checkLen(op, "bias", bias, OC)
		bv := floatView(op, bias)
		b = bv.load(0, OC, bv.tmp(OC))
	}
	return r.BgemmRound(false, true, N, OC, C, 1, x16, C, w16, C, b, u16s(op, out), OC)
}
