// Package backend owns the device abstraction every numeric piece of gotrain
// runs on: DType, Buffer (a typed view of pooled memory), the memory
// accounting by pool and category, and the Backend interface with GPT-2's op
// set.
//
// Dimension key used throughout: B = batch size, T = sequence length,
// C = channels, NH = number of (query) heads, KV = number of key/value heads
// (NH for GPT-2, fewer with grouped-query attention), HD = head size,
// V = vocabulary size, Vp = V padded (e.g. 50257 → 50304), N = number of rows
// (usually B*T), OC = output channels.
//
// Op conventions (llm.c's): outputs first, then saved statistics, then inputs
// and weights, then dimensions. Backward ops ACCUMULATE (+=) into parameter
// gradients (dweight, dbias, dwte, dwpe) so gradient accumulation is free, and
// OVERWRITE (=) activation gradients (dinp, dqkv, dlogits); the zero Buffer
// given for a parameter gradient marks a frozen tensor (LoRA's base), whose
// gradient the op then does not compute at all. Ops may run
// asynchronously; Sync returns the first failure. Floating-point buffers may
// be F32, BF16 or F16 in any mix unless an op says otherwise; 16-bit values
// are widened to fp32, computed in fp32 and rounded to nearest-even on store.
// A shape or length mismatch is a bug in the caller and panics.
package backend

// MemoryStats is what a Backend holds right now and at its peak, in bytes.
type MemoryStats struct {
	Current [numPools][numCategories]int64
	Peak    [numPools]int64 // peak of the pool's total since the last ResetPeak
}

// PoolTotal is the current total of pool p over every category.
func (s MemoryStats) PoolTotal(p Pool) int64 {
	var t int64
	for _, v := range s.Current[p] {
		t += v
	}
	return t
}

// AdamWParams are the hyperparameters of one AdamW update.
// Step is the 1-based optimizer step used for bias correction.
// GradScale multiplies every gradient before use (1/loss_scale times the
// clipping coefficient); WeightDecay is 0 for tensors that are not decayed.
type AdamWParams struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32
	GradScale                          float32
	Step                               int
}

// Backend allocates memory in pools and runs GPT-2's ops on it.
// A Backend is used by one goroutine at a time unless an implementation says
// otherwise.
type Backend interface {
	// Name identifies the backend ("cpu", "cuda:0").
	Name() string

	// Alloc returns n zeroed elements of dt in pool, accounted under cat.
	Alloc(pool Pool, cat Category, dt DType, n int) (Buffer, error)
	// Free returns a buffer's whole allocation. b must be an unsliced buffer
	// returned by Alloc.
	Free(b Buffer)
	// Memory reports current and peak bytes by pool and category.
	Memory() MemoryStats
	// ResetPeak starts a new peak measurement.
	ResetPeak()

	// Upload copies len(src) bytes of host memory into dst (raw bytes in dst's
	// dtype). Download copies src's bytes into dst. Both block.
	Upload(dst Buffer, src []byte) error
	Download(dst []byte, src Buffer) error
	// Copy copies src into dst; both have the same length and may be in any
	// pool. Casts when the dtypes differ (float types only).
	Copy(dst, src Buffer)
	// Zero sets every element of dst to zero.
	Zero(dst Buffer)
	// Sync waits for queued work and returns the first asynchronous failure.
	Sync() error

	// EncoderForward: out (B,T,C) = wte[inp] + wpe[t]. inp is I32 (B,T),
	// wte (V or Vp,C), wpe (maxT,C). wpe may be the zero Buffer (models
	// without learned positions, e.g. RoPE): out = wte[inp].
	EncoderForward(out, inp, wte, wpe Buffer, B, T, C int)
	// EncoderBackward: dwte[inp] += dout, dwpe[t] += dout (summed over B).
	// dwpe may be the zero Buffer: only dwte is accumulated. Both zero
	// (frozen embeddings): nothing is done.
	EncoderBackward(dwte, dwpe, dout, inp Buffer, B, T, C int)

	// LayerNormForward over N rows of C: out = (inp-mean)*rstd*weight + bias.
	// mean and rstd are F32 (N) and saved for backward. eps = 1e-5.
	LayerNormForward(out, mean, rstd, inp, weight, bias Buffer, N, C int)
	// LayerNormBackward: dinp = ..., dweight += ..., dbias += ...
	// dweight and dbias may both be the zero Buffer (a frozen norm): only
	// dinp is computed.
	LayerNormBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd Buffer, N, C int)

	// MatmulForward: out (N,OC) = inp (N,C) · weight(OC,C)ᵀ + bias (OC).
	// bias may be the zero Buffer.
	MatmulForward(out, inp, weight, bias Buffer, N, C, OC int)
	// MatmulBackward: dinp (N,C) = dout·weight; dweight (OC,C) += doutᵀ·inp;
	// dbias (OC) += Σ_rows dout. dinp, dweight or dbias may be the zero
	// Buffer (skipped): a frozen weight costs no weight-gradient GEMM and no
	// gradient memory.
	MatmulBackward(dinp, dweight, dbias, dout, inp, weight Buffer, N, C, OC int)

	// AttentionForward: causal self-attention with grouped key/value heads.
	// qkv (B, T, (NH+2·KV)·HD) holds per token NH query heads, then KV key
	// heads, then KV value heads of HD (GPT-2: KV = NH, HD = C/NH); query head
	// h uses key/value head h/(NH/KV). out (B, T, NH·HD); lse (B, NH, T) is F32,
	// the log-sum-exp of each query row's scaled scores, saved for backward.
	// Scale 1/sqrt(HD). No (B, NH, T, T) buffer is held: memory is O(T) per head.
	// NH must be a multiple of KV. In 16-bit storage a backend may round the
	// probabilities (and backward's dS) to the storage dtype before it
	// multiplies them on tensor cores, as FlashAttention does: each term of
	// those sums then carries up to half an ulp more error.
	AttentionForward(out, lse, qkv Buffer, B, T, NH, KV, HD int)
	// AttentionBackward: dqkv (B, T, (NH+2·KV)·HD) = gradient w.r.t. qkv (=),
	// with scores recomputed from qkv and lse; out and dout are the forward's
	// output and its gradient. A key/value head's gradient sums over the
	// NH/KV query heads that share it.
	AttentionBackward(dqkv, dout, out, qkv, lse Buffer, B, T, NH, KV, HD int)

	// GeluForward: out = 0.5·x·(1+tanh(√(2/π)(x+0.044715x³))) over N elements.
	GeluForward(out, inp Buffer, N int)
	// GeluBackward: dinp = gelu'(inp)·dout.
	GeluBackward(dinp, inp, dout Buffer, N int)

	// Add: out = a + b over N elements (the residual connection; out may
	// alias a or b).
	Add(out, a, b Buffer, N int)
	// Scale: x *= s over all of x.
	Scale(x Buffer, s float32)

	// CrossEntropyForward: for each of N rows of logits (N,Vp), softmax over
	// the first V columns (padded columns never enter), probs (N,Vp, F32;
	// padded columns 0) saved, losses (N, F32) = -log probs[target].
	// targets is I32 (N).
	CrossEntropyForward(losses, probs, logits, targets Buffer, N, V, Vp int)
	// CrossEntropyBackward: dlogits (N,Vp) = (probs - onehot(target))·dloss,
	// padded columns 0. dloss is the gradient of the total loss w.r.t. each
	// row's loss (1/(B·T·gas) for a mean). dlogits may alias probs.
	CrossEntropyBackward(dlogits, probs, targets Buffer, dloss float32, N, V, Vp int)
	// FusedClassifier is llm.c's fused_classifier: for each of N rows of
	// logits (N,Vp), losses (N, F32) = logsumexp − logits[target] over the
	// first V columns and, when dloss ≠ 0, logits is overwritten in its own
	// dtype with dlogits = (softmax − onehot(target))·dloss, padded columns
	// 0. One pass over the logits and no (N,Vp) probabilities: a 16-bit
	// model's classifier gradient stays 16-bit, so its GEMMs do too. With
	// dloss = 0 the logits are left as they are (the forward's loss).
	FusedClassifier(losses, logits, targets Buffer, dloss float32, N, V, Vp int)

	// AdamW updates param (and master, when not the zero Buffer) from grad:
	// m = β1 m + (1-β1) g; v = β2 v + (1-β2) g²; with g = grad·GradScale;
	// p -= LR·(m̂/(√v̂+eps) + WeightDecay·p). With master (F32) the math runs
	// on master and param receives master rounded to its dtype. m and v are F32.
	AdamW(param, master, grad, m, v Buffer, p AdamWParams)
	// AddSum: acc (F32, one element) += Σx over x (F32), without waiting
	// for the device: a loss summed over micro-batches is read once per
	// optimizer step.
	AddSum(acc, x Buffer)
	// SumSquares returns Σx² in float64 accumulation (blocks until done).
	SumSquares(x Buffer) float64
	// NonFinite reports whether x holds a NaN or an Inf (blocks).
	NonFinite(x Buffer) bool
}

// QueuedReader is implemented by backends whose reads of device memory
// can be queued behind the work already queued (the CUDA backend: an
// async copy into pinned memory). A value read once per optimizer step,
// such as the loss summed over its micro-batches, then arrives with a
// synchronisation the step makes anyway instead of one of its own.
type QueuedReader interface {
	// QueueRead queues a copy of src's bytes to the host and returns the
	// function that returns them, waiting for the device only if the
	// backend has not waited for it since the call. Call it once.
	QueueRead(src Buffer) func() ([]byte, error)
}

// ResidualLayerNormer is implemented by backends that fuse the residual
// add with the LayerNorm after it (one pass over memory instead of two
// kernels); the model uses it when the backend has it.
type ResidualLayerNormer interface {
	// ResidualLayerNormForward: residual = a + b over N·C elements
	// (residual may alias a or b), then LayerNormForward(out, mean, rstd,
	// residual, weight, bias, N, C). The results must equal that two-op
	// sequence's.
	ResidualLayerNormForward(residual, out, mean, rstd, a, b, weight, bias Buffer, N, C int)
}
