package cuda

import (
	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/kernels"
)

// AdamW implements backend.Backend elementwise on the device, in the CPU
// backend's order of operations, so both agree to fp32 rounding. Offloaded
// optimizer states (every buffer in a host pool) are updated by the host
// backend.
func (b *Backend) AdamW(param, master, grad, m, v backend.Buffer, p backend.AdamWParams) {
	const op = "adamw"
	if b.hostOp(op, param, master, grad, m, v) {
		b.host.AdamW(param, master, grad, m, v, p)
		return
	}
	n := param.Len()
	needLen(op, "grad", grad, n)
	needLen(op, "m", m, n)
	needLen(op, "v", v, n)
	if m.DType() != backend.F32 || v.DType() != backend.F32 {
		panic("cuda: adamw: m and v must be F32")
	}
	if !param.DType().IsFloat() || !grad.DType().IsFloat() {
		panic("cuda: adamw: param and grad must be float buffers")
	}
	if p.Step < 1 {
		panic("cuda: adamw: Step must be ≥ 1")
	}
	var ms kernels.Tensor // Ptr 0: no master, the math runs on param
	if !master.IsNil() {
		needLen(op, "master", master, n)
		if master.DType() != backend.F32 {
			panic("cuda: adamw: master must be F32")
		}
		ms = b.t(op, master)
	}
	args := kernels.AdamWArgs{LR: p.LR, Beta1: p.Beta1, Beta2: p.Beta2, Eps: p.Eps,
		WeightDecay: p.WeightDecay, GradScale: p.GradScale, Step: p.Step}
	b.check(op, b.k.AdamW(b.stream, b.t(op, param), ms, b.t(op, grad), b.t(op, m), b.t(op, v), n, args))
}
