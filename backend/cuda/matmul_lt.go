package cuda

import (
	"errors"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/cublas"
	cu "github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/kernels"
)

// ltState is the backend's cuBLASLt handle (whose plan cache keeps one
// descriptor and heuristic result per product shape) and the workspace its
// matmuls share, allocated on first use: 32 MiB on Hopper and later,
// 4 MiB before, the sizes NVIDIA recommends for cuBLAS. Both are touched
// only on the device's thread, and the matmuls using the workspace run in
// order on the compute stream.
type ltState struct {
	h       *cublas.LtHandle
	ws      cu.DevicePtr
	wsBytes int
	wsTried bool
}

// ltWorkspace allocates the workspace once; a device without room for it
// runs cuBLASLt without one (fewer algorithms to choose from), which is
// not a failure. It runs on the device's thread.
func (b *Backend) ltWorkspace(c *cu.Ctx) (cu.DevicePtr, int) {
	l := b.lt
	if !l.wsTried {
		l.wsTried = true
		n := 4 << 20
		if b.dev.Info().SM() >= 90 {
			n = 32 << 20
		}
		if p, err := c.Alloc(n); err == nil {
			l.ws, l.wsBytes = p, n
			b.mu.Lock()
			b.stats.Current[backend.Device][backend.Workspace] += int64(n)
			b.notePeak(backend.Device)
			b.mu.Unlock()
		}
	}
	return l.ws, l.wsBytes
}

// ltAligned reports whether an epilogue vector or aux buffer may go to
// cuBLASLt: its epilogue kernels read and write them in 16-byte vectors,
// so less aligned views take the kernel path instead.
func ltAligned(t kernels.Tensor) bool { return uint64(t.Ptr)%16 == 0 }

// ltType is a GEMM operand's cuBLAS type: the GEMM paths only pass F32
// and BF16 tensors.
func ltType(t kernels.Tensor) cublas.DataType {
	if t.DT == kernels.BF16 {
		return cublas.R16BF
	}
	return cublas.R32F
}

// ltLinear queues out (N,OC) = epilogue(x (N,C) · w (OC,C)ᵀ + bias) on
// cuBLASLt, row-major, with the GELU when gelu is set (and its input kept
// in aux when aux.Ptr is not 0). bias.Ptr 0 adds no bias. It reports
// false, having queued nothing, when cuBLASLt cannot plan the product (the
// handle remembers, so the next call of the shape costs nothing): the
// caller computes it another way. Any other failure is the backend's
// error.
func (b *Backend) ltLinear(op string, out, aux, x, w, bias kernels.Tensor, gelu bool, N, C, OC int) bool {
	mat := func(t kernels.Tensor, ld int) cublas.Matrix {
		return cublas.Matrix{Ptr: t.Ptr, Type: ltType(t), LD: max(1, ld)}
	}
	p := cublas.LtMatmul{TransA: cublas.NoTrans, TransB: cublas.Trans, M: N, N: OC, K: C, Alpha: 1,
		A: mat(x, C), B: mat(w, C), C: mat(out, OC), GELU: gelu, Stream: b.stream, Compute: b.compute(x.DT)}
	if bias.Ptr != 0 {
		p.Bias = cublas.Vector{Ptr: bias.Ptr, Type: ltType(bias)}
	}
	if aux.Ptr != 0 {
		p.Aux = mat(aux, OC)
	}
	err := b.dev.Do(func(c *cu.Ctx) error {
		p.Workspace, p.WorkspaceBytes = b.ltWorkspace(c)
		c.MarkQueued(b.stream)
		return b.lt.h.MatmulRowMajor(p)
	})
	if errors.Is(err, cublas.ErrNoPlan) {
		return false
	}
	b.check(op, err)
	return true
}

// MatmulGeluForward is MatmulForward then GeluForward in one step: pre
// (N,OC) = inp·weightᵀ + bias, the pre-activation the backward pass needs,
// and out (N,OC) = GELU(pre), tanh form. bias may be the zero Buffer. With
// cuBLASLt, when out and pre are both F32, or both BF16 from BF16 inputs,
// the bias has their dtype, and OC is a multiple of 8, it is one GEMM
// whose epilogue adds the bias, keeps pre and applies the GELU to the
// fp32 sum (so a 16-bit out is GELU of pre before its rounding, within
// one rounding of the two-op result); otherwise (or when cuBLASLt has no
// algorithm for it) it is exactly the two ops.
// A model finds it with a type assertion on an interface of this one
// method.
func (b *Backend) MatmulGeluForward(out, pre, inp, weight, bias backend.Buffer, N, C, OC int) {
	const op = "matmul gelu forward"
	if b.lt == nil || b.hostOp(op, out, pre, inp, weight, bias) {
		b.MatmulForward(pre, inp, weight, bias, N, C, OC)
		b.GeluForward(out, pre, N*OC)
		return
	}
	needLen(op, "out", out, N*OC)
	needLen(op, "pre", pre, N*OC)
	needLen(op, "inp", inp, N*C)
	needLen(op, "weight", weight, OC*C)
	var bt kernels.Tensor
	if !bias.IsNil() {
		needLen(op, "bias", bias, OC)
		bt = b.t(op, bias)
	}
	o, a, x, w := b.t(op, out), b.t(op, pre), b.t(op, inp), b.t(op, weight)
	bf16 := x.DT == kernels.BF16 && w.DT == kernels.BF16
	fused := N > 0 && OC > 0 && C > 0 && OC%8 == 0 && o.DT == a.DT && writable(o, bf16) &&
		(bf16 || (x.DT == kernels.F32 && w.DT == kernels.F32)) &&
		(bt.Ptr == 0 || (bt.DT == o.DT && ltAligned(bt))) && ltAligned(a)
	if !fused || !b.ltLinear(op, o, a, x, w, bt, true, N, C, OC) {
		b.MatmulForward(pre, inp, weight, bias, N, C, OC)
		b.GeluForward(out, pre, N*OC)
	}
}
