package model

import "github.com/gotrain/gotrain/backend"

// blockActs is what one transformer block saves in forward for backward
// (llm.c's ActivationTensors, one block's slice). Shapes use N = B·T,
// QKV = (NH+2·KV)·HD, A = NH·HD (C for GPT-2), U = the MLP's first
// projection width (4C for GPT-2, 2·FF for SwiGLU) and F = its activation's
// width (4C, FF). Buffers a model does not use stay the zero Buffer: the
// norms' means (RMSNorm has none), qkvr and qkRstd (without RoPE qkvr is
// qkv; without q/k norms RoPE rotates qkv in place).
type blockActs struct {
	ln1, ln1Mean, ln1Rstd backend.Buffer // (N,C), F32 (N), F32 (N)
	qkv                   backend.Buffer // (N,QKV): the projection's output
	qkvr                  backend.Buffer // (N,QKV): attention's input (q/k normed and rotated)
	qkRstd                backend.Buffer // F32 (N·(NH+KV)): the q/k norms' rstd
	atty                  backend.Buffer // (N,A): attention output before the projection
	lse                   backend.Buffer // F32 (B,NH,T): each attention row's log-sum-exp
	residual2             backend.Buffer // (N,C): stream after the attention half
	ln2, ln2Mean, ln2Rstd backend.Buffer // (N,C), F32 (N), F32 (N)
	fch, fchAct           backend.Buffer // (N,U) and (N,F): the MLP's first projection and its activation
	residual3             backend.Buffer // (N,C): the block's output
}

// activations holds every tensor of one (B,T) forward/backward, carved out
// of one arena per dtype (allocated in the Activations category) so a
// smaller batch reuses the memory of a larger one.
type activations struct {
	B, T int
	// ckpt: activation checkpointing. Only blocks[0] exists and every block
	// reuses it; saved[l] keeps block l's input (saved[L] the last block's
	// output, the final norm's input), in the checkpoint pool; backward
	// recomputes each block from it.
	ckpt  bool
	saved []backend.Buffer
	ckptX backend.Buffer // (N,C) on the device: a host-pool saved input copied back for recompute

	inputs, targets backend.Buffer // I32 (B,T)
	// cos and sin are RoPE's F32 (T, HD/2) tables for positions 0..T-1,
	// uploaded once per (B,T) layout: constants, accounted with the
	// activations because their size follows T.
	cos, sin         backend.Buffer
	encoded          backend.Buffer // (N,C) = wte[inp] (+ wpe)
	blocks           []blockActs
	lnf              backend.Buffer // (N,C)
	lnfMean, lnfRstd backend.Buffer // F32 (N); lnfMean LayerNorm only
	// logits is (N,Vp) in the activations' dtype: the logits, which the
	// backend's fused classifier overwrites with dlogits in place in
	// backward. No probabilities are stored. With checkpointing there is
	// no (N,Vp) buffer: chunk holds LogitChunkRows rows at a time,
	// recomputed in backward.
	logits backend.Buffer
	chunk  backend.Buffer // (LogitChunkRows,Vp) or (N,Vp) if smaller; ckpt only
	losses backend.Buffer // F32 (N)

	// Scratch shared by every block; activation gradients are written (=),
	// so the residual stream's gradient is accumulated with Add.
	scratch backend.Buffer // (N,C): a projection's output before the residual add; norm dinp in backward
	dres    backend.Buffer // (N,C): gradient w.r.t. the residual stream
	dbtc    backend.Buffer // (N,max(C,A)): dln2, datty, dln1 in turn
	// d4a (N,max(F,QKV)) holds the activation's gradient, then attention's
	// dqkv; d4b (N,U, or QKV if wider and q/k norms need it) the MLP
	// projection's gradient, then the rotary op's dqkv when it cannot work
	// in place.
	d4a, d4b backend.Buffer
}

// LogitChunkRows bounds the logits staged before the loss under activation
// checkpointing: 256 rows of GPT-2 logits are 51 MB in fp32, still a GEMM
// large enough to run near full speed.
const LogitChunkRows = 256

// LogitBlockRows is how many rows one classifier GEMM takes without
// checkpointing, where every row's logits are kept anyway: each GEMM reads
// (packs) the whole head once, and on GPT-2's 50,304×C head that read is
// what keeps a 256-row product 10-30% below the rate of a 2,048-row one.
// A multiple of LogitChunkRows, so the head's gradient sums the same
// 256-row slabs in the same order with and without checkpointing (the GEMMs
// accumulate over K in 256-deep slabs) and both give the same bits; bounded
// so a backend that widens a 16-bit dlogits block to fp32 scratch holds
// 2,048 rows of it, not every row.
const LogitBlockRows = 8 * LogitChunkRows

// arenaAlign keeps every tensor's start 256-byte aligned for vector loads.
const arenaAlign = 256

// actPlan records where each activation goes before the arenas exist.
type actPlan struct {
	need    map[arenaKey]int // elements per arena
	slots   []actSlot
	aliases [][2]*backend.Buffer // {dst, src}: dst is src, set after the slots
}

// alias makes *dst the same buffer as *src once the slots are placed.
func (p *actPlan) alias(dst, src *backend.Buffer) {
	p.aliases = append(p.aliases, [2]*backend.Buffer{dst, src})
}

// place points every slot and alias at its arena.
func (p *actPlan) place(arenas map[arenaKey]backend.Buffer) {
	for _, s := range p.slots {
		*s.dst = arenas[s.key].Slice(s.off, s.n)
	}
	for _, a := range p.aliases {
		*a[0] = *a[1]
	}
}

// arenaKey names one arena: activations live in one allocation per pool and
// dtype.
type arenaKey struct {
	pool backend.Pool
	dt   backend.DType
}

type actSlot struct {
	key arenaKey
	off int
	n   int
	dst *backend.Buffer
}

func (p *actPlan) add(dst *backend.Buffer, dt backend.DType, n int) {
	p.addIn(backend.Device, dst, dt, n)
}

func (p *actPlan) addIn(pool backend.Pool, dst *backend.Buffer, dt backend.DType, n int) {
	k := arenaKey{pool, dt}
	align := arenaAlign / dt.Size()
	off := (p.need[k] + align - 1) / align * align
	p.slots = append(p.slots, actSlot{key: k, off: off, n: n, dst: dst})
	p.need[k] = off + n
}

// planActivations lays out a's tensors for (B,T) with activation dtype dt.
// With ckpt, only one block's tensors exist and the L+1 block boundaries are
// kept in ckptPool.
func planActivations(a *activations, cfg Config, B, T int, dt backend.DType, ckpt bool, ckptPool backend.Pool) *actPlan {
	p := &actPlan{need: map[arenaKey]int{}}
	N, C := B*T, cfg.C
	QKV, A, U, F := cfg.QKVWidth(), cfg.AttnWidth(), cfg.upWidth(), cfg.FF
	layerNorm, rope := cfg.Norm == LayerNorm, cfg.Pos == RotaryPositions
	a.B, a.T, a.ckpt = B, T, ckpt
	p.add(&a.inputs, backend.I32, N)
	p.add(&a.targets, backend.I32, N)
	if rope {
		p.add(&a.cos, backend.F32, T*cfg.HD/2)
		p.add(&a.sin, backend.F32, T*cfg.HD/2)
	}
	p.add(&a.encoded, dt, N*C)
	nblocks := cfg.L
	if ckpt {
		nblocks = 1
		a.saved = make([]backend.Buffer, cfg.L+1)
		for l := range a.saved {
			p.addIn(ckptPool, &a.saved[l], dt, N*C)
		}
		if ckptPool != backend.Device {
			p.add(&a.ckptX, dt, N*C)
		}
	}
	a.blocks = make([]blockActs, nblocks)
	for l := range a.blocks {
		b := &a.blocks[l]
		p.add(&b.ln1, dt, N*C)
		if layerNorm {
			p.add(&b.ln1Mean, backend.F32, N)
		}
		p.add(&b.ln1Rstd, backend.F32, N)
		p.add(&b.qkv, dt, N*QKV)
		if !cfg.QKNorm {
			p.alias(&b.qkvr, &b.qkv)
		} else {
			p.add(&b.qkvr, dt, N*QKV)
			p.add(&b.qkRstd, backend.F32, N*(cfg.NH+cfg.KV))
		}
		p.add(&b.atty, dt, N*A)
		p.add(&b.lse, backend.F32, B*cfg.NH*T)
		p.add(&b.residual2, dt, N*C)
		p.add(&b.ln2, dt, N*C)
		if layerNorm {
			p.add(&b.ln2Mean, backend.F32, N)
		}
		p.add(&b.ln2Rstd, backend.F32, N)
		p.add(&b.fch, dt, N*U)
		p.add(&b.fchAct, dt, N*F)
		p.add(&b.residual3, dt, N*C)
	}
	p.add(&a.lnf, dt, N*C)
	if layerNorm {
		p.add(&a.lnfMean, backend.F32, N)
	}
	p.add(&a.lnfRstd, backend.F32, N)
	if !ckpt {
		p.add(&a.logits, dt, N*cfg.Vp)
	} else {
		// The logits are recomputed chunk by chunk in backward.
		p.add(&a.chunk, dt, min(N, LogitChunkRows)*cfg.Vp)
	}
	p.add(&a.losses, backend.F32, N)
	p.add(&a.scratch, dt, N*C)
	p.add(&a.dres, dt, N*C)
	p.add(&a.dbtc, dt, N*max(C, A))
	p.add(&a.d4a, dt, N*max(F, QKV))
	if cfg.QKNorm {
		p.add(&a.d4b, dt, N*max(U, QKV))
	} else {
		p.add(&a.d4b, dt, N*U)
	}
	return p
}

// bytes is the arenas' total size.
func (p *actPlan) bytes() int64 {
	var n int64
	for key, k := range p.need {
		n += int64(k) * int64(key.dt.Size())
	}
	return n
}

// ActivationBytes is the memory a Model holds for activations (saved
// tensors, logits and backward scratch) at batch B, sequence length T, with
// activations stored as dt, in every pool; with ckpt (activation
// checkpointing) only block boundaries are kept.
func ActivationBytes(cfg Config, B, T int, dt backend.DType, ckpt bool) int64 {
	return planActivations(&activations{}, cfg, B, T, dt, ckpt, backend.Device).bytes()
}
