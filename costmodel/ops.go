package costmodel

import (
	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/meta"
)

// Unit is where a part of an op runs, which decides the peak it is priced
// at.
type Unit int

const (
	// TensorBF16 is a GEMM with bf16 operands on the tensor cores.
	TensorBF16 Unit = iota
	// CUDACores is a kernel, an fp32 GEMM (CUBLAS_COMPUTE_32F) or a
	// device-to-device copy: fp32 arithmetic, device memory.
	CUDACores
	// Link is a copy between host and device memory.
	Link
	// HostCPU is an op on host-pool buffers (the offloaded optimizer),
	// which the CPU backend runs: no GPU time.
	HostCPU
)

func (u Unit) String() string {
	return [...]string{"bf16 tensor", "fp32 cores", "host link", "host CPU"}[u]
}

// Part is one kind of kernel, GEMM or copy an op launches: Calls of them,
// with FLOPs and Bytes their totals.
type Part struct {
	Name  string
	Unit  Unit
	FLOPs float64
	Bytes float64
	Calls int
}

// Parts maps one traced call to what the CUDA backend launches for it. ok
// is false for an op the model has no formula for: it is priced as one
// kernel that reads each input and writes each output once.
func Parts(c meta.Call) (parts []Part, ok bool) {
	v := view(c)
	if v.onHost() {
		return []Part{{Name: "on the host CPU", Unit: HostCPU, Calls: 1}}, true
	}
	if p, known := formula(v); known {
		return p, true
	}
	return []Part{v.kernel("kernel "+c.Op, 0)}, false
}

// formula is the per-op model of a traced call, by the Backend method's
// name; false for an op it does not know.
func formula(v view) ([]Part, bool) {
	one := func(p Part) []Part { return []Part{p} }
	switch v.Op {
	case "Upload":
		return one(Part{Name: "copy host→device", Unit: Link, Bytes: v.bytes("dst"), Calls: 1}), true
	case "Download":
		return one(Part{Name: "copy device→host", Unit: Link, Bytes: v.bytes("src"), Calls: 1}), true
	case "Copy":
		return copyParts(v), true
	case "Zero":
		return one(Part{Name: "memset", Unit: CUDACores, Bytes: v.bytes("dst"), Calls: 1}), true
	case "EncoderForward":
		return encoderForward(v), true
	case "EncoderBackward":
		if !v.has("dwte") { // frozen embeddings: nothing runs
			return nil, true
		}
		return encoderBackward(v), true
	case "LayerNormForward":
		return one(v.kernel("kernel layernorm forward", 8)), true
	case "ResidualLayerNormForward":
		return one(v.kernel("kernel residual+layernorm forward", 9)), true
	case "LayerNormBackward":
		return layerNormBackward(v), true
	case "MatmulForward":
		return matmulForward(v), true
	case "MatmulBackward":
		return matmulBackward(v), true
	case "AttentionForward":
		return attentionForward(v), true
	case "AttentionBackward":
		return attentionBackward(v), true
	case "GeluForward":
		return one(v.kernel("kernel gelu forward", 10)), true
	case "GeluBackward":
		return one(v.kernel("kernel gelu backward", 16)), true
	case "Add":
		return one(v.kernel("kernel add", 1)), true
	case "Dropout":
		// A hash per element, a compare and a multiply.
		return one(v.kernel("kernel dropout", 12)), true
	case "Scale":
		return one(Part{Name: "kernel scale", Unit: CUDACores, FLOPs: float64(v.len("x")), Bytes: 2 * v.bytes("x"), Calls: 1}), true
	case "CrossEntropyForward":
		N, Vp := v.dim("N"), v.dim("Vp")
		// One block per row: a pass over the logits for the softmax state
		// (max and sum), a second that writes the fp32 probabilities.
		return one(Part{Name: "kernel cross-entropy forward", Unit: CUDACores, FLOPs: 6 * float64(N*Vp), Calls: 1,
			Bytes: 2*v.bytes("logits") + v.bytes("probs") + v.bytes("targets") + v.bytes("losses")}), true
	case "CrossEntropyBackward":
		return one(v.kernel("kernel cross-entropy backward", 2)), true
	case "FusedClassifier":
		// One block per row: a pass over the logits for the softmax state
		// and the loss; with dlogits, a second pass that reads each logit
		// again and overwrites it in its own dtype. No probabilities.
		N, Vp := v.dim("N"), v.dim("Vp")
		p := Part{Name: "kernel fused classifier (loss)", Unit: CUDACores, FLOPs: 4 * float64(N*Vp), Calls: 1,
			Bytes: v.bytes("logits") + v.bytes("targets") + v.bytes("losses")}
		if v.dim("dlogits") != 0 {
			p.Name = "kernel fused classifier (loss and dlogits)"
			p.FLOPs += 6 * float64(N*Vp)
			p.Bytes += 2 * v.bytes("logits")
		}
		return one(p), true
	case "AddSum":
		return one(Part{Name: "kernel add sum", Unit: CUDACores, FLOPs: float64(v.len("x")), Bytes: v.bytes("x") + 8, Calls: 1}), true
	case "AdamW":
		return one(v.kernel("kernel adamw", 16)), true
	case "SumSquares":
		return []Part{
			{Name: "kernel sum of squares", Unit: CUDACores, FLOPs: 2 * float64(v.len("x")), Bytes: v.bytes("x"), Calls: 1},
			{Name: "copy device→host (partial sums; waits for the stream)", Unit: Link, Calls: 1},
		}, true
	case "NonFinite":
		return []Part{
			{Name: "memset flag", Unit: CUDACores, Bytes: 4, Calls: 1},
			{Name: "kernel non-finite check", Unit: CUDACores, FLOPs: float64(v.len("x")), Bytes: v.bytes("x"), Calls: 1},
			{Name: "copy device→host (flag; waits for the stream)", Unit: Link, Bytes: 4, Calls: 1},
		}, true

	// The Llama family's ops, priced as the streaming kernels they are.
	case "RMSNormForward":
		return one(v.kernel("kernel rmsnorm forward", 5)), true
	case "ResidualRMSNormForward":
		return one(v.kernel("kernel residual+rmsnorm forward", 6)), true
	case "RMSNormBackward":
		// As LayerNorm's: dinp per row, then dweight through column
		// partials (none for a frozen norm).
		p := []Part{v.kernel("kernel rmsnorm backward", 10)}
		if v.has("dweight") {
			p = append(p, Part{Name: "kernel rmsnorm dweight partial", Unit: CUDACores, FLOPs: 2 * float64(v.len("inp")), Calls: 1,
				Bytes: v.bytes("dout") + v.bytes("inp") + v.bytes("rstd")})
		}
		return p, true
	case "QKVRotaryForward":
		return one(v.kernel("kernel qkv norm+rotary forward", 8)), true
	case "QKVRotaryBackward":
		return one(v.kernel("kernel qkv norm+rotary backward", 12)), true
	case "SwiGLUForward":
		return one(v.kernel("kernel swiglu forward", 8)), true
	case "SwiGLUBackward":
		return one(v.kernel("kernel swiglu backward", 14)), true
	}
	return nil, false
}

func encoderForward(v view) []Part {
	B, T, C := v.dim("B"), v.dim("T"), v.dim("C")
	// A gather: B·T rows of wte and T rows of wpe, not the whole tables.
	return []Part{{Name: "kernel encoder forward", Unit: CUDACores, FLOPs: float64(B * T * C), Calls: 1,
		Bytes: v.bytes("out") + v.bytes("inp") + float64(B*T*C)*v.size("wte") + float64(T*C)*v.size("wpe")}}
}

func encoderBackward(v view) []Part {
	B, T, C := v.dim("B"), v.dim("T"), v.dim("C")
	n := float64(B * T)
	return []Part{
		// Grouping the positions by token: the ids read, a ranking and the
		// group bounds written (int32 each).
		{Name: "kernel encoder group", Unit: CUDACores, Bytes: 3 * 4 * n, Calls: 1},
		{Name: "kernel encoder dwte", Unit: CUDACores, FLOPs: n * float64(C), Calls: 1,
			Bytes: v.bytes("dout") + 2*n*float64(C)*v.size("dwte") + 2*4*n},
		{Name: "kernel encoder dwpe", Unit: CUDACores, FLOPs: n * float64(C), Calls: 1,
			Bytes: v.bytes("dout") + 2*v.size("dwpe")*float64(T*C)},
	}
}

func layerNormBackward(v view) []Part {
	nc := float64(v.dim("N") * v.dim("C"))
	dinp := Part{Name: "kernel layernorm dinp", Unit: CUDACores, FLOPs: 12 * nc, Calls: 1,
		Bytes: v.bytes("dout") + v.bytes("inp") + v.bytes("weight") + v.bytes("mean") + v.bytes("rstd") + v.bytes("dinp")}
	if !v.has("dweight") { // a frozen norm
		return []Part{dinp}
	}
	return []Part{
		dinp,
		// dweight and dbias: column partials per row chunk, then a
		// reduction in chunk order (no float atomics); the partials are
		// small next to the rows.
		{Name: "kernel layernorm dweight/dbias partial", Unit: CUDACores, FLOPs: 4 * nc, Calls: 1,
			Bytes: v.bytes("dout") + v.bytes("inp") + v.bytes("mean") + v.bytes("rstd")},
		{Name: "kernel layernorm dweight/dbias reduce", Unit: CUDACores, Calls: 1,
			Bytes: 2 * (v.bytes("dweight") + v.bytes("dbias"))},
	}
}

// accumulates reports whether ops read and write the argument named name
// (parameter gradients add, AdamW updates in place); every other argument
// is read or written once.
func accumulates(name string) bool {
	switch name {
	case "dweight", "dbias", "dwte", "dwpe", "dqnorm", "dknorm", "param", "master", "m", "v":
		return true
	}
	return false
}

// view reads a traced call.
type view meta.Call

func (v view) dim(name string) int {
	n, _ := meta.Call(v).Dim(name)
	return n
}

func (v view) arg(name string) (meta.Arg, bool) {
	for _, a := range v.Args {
		if a.Name == name {
			return a, true
		}
	}
	return meta.Arg{}, false
}

func (v view) has(name string) bool { _, ok := v.arg(name); return ok }

// bytes is the named argument's size (0 when absent).
func (v view) bytes(name string) float64 {
	a, _ := v.arg(name)
	return argBytes(a)
}

// argBytes is a's size, 0 for an absent argument or an unknown dtype.
func argBytes(a meta.Arg) float64 { return float64(a.Len) * sizeOf(a.DType) }

// sizeOf is dt's element size, 0 for the zero DType of an absent argument.
func sizeOf(dt backend.DType) float64 {
	switch dt {
	case backend.F32, backend.BF16, backend.F16, backend.I32, backend.U16:
		return float64(dt.Size())
	}
	return 0
}

func (v view) len(name string) int {
	a, _ := v.arg(name)
	return a.Len
}

func (v view) dt(name string) backend.DType {
	a, _ := v.arg(name)
	return a.DType
}

func (v view) size(name string) float64 { return sizeOf(v.dt(name)) }

// onHost reports whether every buffer of the call is in a host pool: the
// CUDA backend hands such ops to the CPU backend.
func (v view) onHost() bool {
	if len(v.Args) == 0 {
		return false
	}
	for _, a := range v.Args {
		if a.Pool == backend.Device {
			return false
		}
	}
	return true
}

// kernel is one streaming kernel: every argument read once, written once,
// or both for accumulators, and flopsPerElem operations per element of the
// largest argument (rough counts: such kernels are memory-bound by an
// order of magnitude, so the counts do not move the estimate).
func (v view) kernel(name string, flopsPerElem float64) Part {
	p := Part{Name: name, Unit: CUDACores, Calls: 1}
	most := 0
	for _, a := range v.Args {
		p.Bytes += argBytes(a)
		if a.Write && accumulates(a.Name) {
			p.Bytes += argBytes(a)
		}
		most = max(most, a.Len)
	}
	p.FLOPs = flopsPerElem * float64(most)
	return p
}

// cast is the Cast kernel that widens or narrows n elements.
func cast(name string, n int, from, to backend.DType) Part {
	return Part{Name: "kernel cast " + name, Unit: CUDACores, Bytes: float64(n) * (sizeOf(from) + sizeOf(to)), Calls: 1}
}

// copyParts: a device copy (or a Cast kernel when the dtypes differ), or a
// transfer over the host link with a cast on the device side.
func copyParts(v view) []Part {
	dst, _ := v.arg("dst")
	src, _ := v.arg("src")
	n := dst.Len
	dh, sh := dst.Pool != backend.Device, src.Pool != backend.Device
	var parts []Part
	switch {
	case !dh && !sh && dst.DType == src.DType:
		parts = append(parts, Part{Name: "copy device→device", Unit: CUDACores, Bytes: 2 * argBytes(dst), Calls: 1})
	case !dh && !sh:
		parts = append(parts, cast("copy", n, src.DType, dst.DType))
	case !dh:
		parts = append(parts, Part{Name: "copy host→device", Unit: Link, Bytes: argBytes(src), Calls: 1})
		if dst.DType != src.DType {
			parts = append(parts, cast("copy", n, src.DType, dst.DType))
		}
	default:
		if dst.DType != src.DType {
			parts = append(parts, cast("copy", n, src.DType, dst.DType))
		}
		parts = append(parts, Part{Name: "copy device→host", Unit: Link, Bytes: argBytes(dst), Calls: 1})
	}
	return parts
}
