package model

import (
	"fmt"

	"github.com/gotrain/gotrain/backend"
)

// Forward runs the model on inputs (B·T token ids, row-major (B,T)) and,
// when targets (B·T ids) is not nil, the cross-entropy loss, returning the
// mean over the B·T tokens (0 without targets). T may be anything up to
// MaxT; a new (B,T) re-lays out the activations, reallocating only when it
// needs more memory than is held.
//
// Graph (nanoGPT): x = wte[inp] + wpe; per block x += attproj(attn(qkv(ln1(x))))
// and x += fcproj(gelu(fc(ln2(x)))); logits = lnf(x)·wteᵀ over Vp columns
// (tied); softmax and loss over the first V columns only.
func (m *Model) Forward(inputs, targets []int32, B, T int) (float32, error) {
	if err := m.checkBatch(inputs, targets, B, T); err != nil {
		return 0, err
	}
	if m.acts == nil || m.acts.B != B || m.acts.T != T {
		if err := m.ReserveActivations(B, T); err != nil {
			return 0, err
		}
	}
	m.state = passNone
	be, cfg, a := m.be, m.cfg, m.acts
	N, C := B*T, cfg.C
	if err := backend.WriteI32(be, a.inputs, inputs); err != nil {
		return 0, fmt.Errorf("model: upload inputs: %w", err)
	}
	if targets != nil {
		if err := backend.WriteI32(be, a.targets, targets); err != nil {
			return 0, fmt.Errorf("model: upload targets: %w", err)
		}
	}

	st := m.store
	embBuf, _, err := st.Acquire(0, false)
	if err != nil {
		return 0, m.storeErr("acquire", 0, false, err)
	}
	wte, wpe := m.embedViews(embBuf)
	be.EncoderForward(a.encoded, a.inputs, wte, wpe, B, T, C)
	residual := a.encoded
	for l := range cfg.L {
		pb, _, err := st.Acquire(l+1, false)
		if err != nil {
			return 0, m.storeErr("acquire", l+1, false, err)
		}
		if a.ckpt {
			be.Copy(a.saved[l], residual)
		}
		ba := m.blockActs(l)
		m.blockForward(ba, residual, m.blockViews(l, pb), B, T)
		residual = ba.residual3
		if err := st.Release(l+1, false); err != nil {
			return 0, m.storeErr("release", l+1, false, err)
		}
	}
	if a.ckpt {
		be.Copy(a.saved[cfg.L], residual)
	}
	fin := cfg.L + 1
	fb, _, err := st.Acquire(fin, false)
	if err != nil {
		return 0, m.storeErr("acquire", fin, false, err)
	}
	lnfw, lnfb := m.finalViews(fb)
	be.LayerNormForward(a.lnf, a.lnfMean, a.lnfRstd, residual, lnfw, lnfb, N, C)
	if err := st.Release(fin, false); err != nil {
		return 0, m.storeErr("release", fin, false, err)
	}
	if targets == nil {
		if a.ckpt {
			return 0, fmt.Errorf("model: a forward without targets keeps every logit, which activation checkpointing does not; use a model without checkpointing to sample")
		}
		be.MatmulForward(a.logits, a.lnf, wte, backend.Buffer{}, N, C, cfg.Vp)
		if err := st.Release(0, false); err != nil {
			return 0, m.storeErr("release", 0, false, err)
		}
		if err := be.Sync(); err != nil {
			return 0, fmt.Errorf("model: forward: %w", err)
		}
		m.state = passLogits
		return 0, nil
	}
	Vp := cfg.Vp
	for r0 := 0; r0 < N; r0 += logitChunkRows {
		n := min(logitChunkRows, N-r0)
		chunk := a.chunk.Slice(0, n*Vp)
		be.MatmulForward(chunk, a.lnf.Slice(r0*C, n*C), wte, backend.Buffer{}, n, C, Vp)
		be.CrossEntropyForward(a.losses.Slice(r0, n), m.probsChunk(r0, n), chunk, a.targets.Slice(r0, n), n, cfg.V, Vp)
	}
	if err := st.Release(0, false); err != nil {
		return 0, m.storeErr("release", 0, false, err)
	}
	if err := be.Sync(); err != nil {
		return 0, fmt.Errorf("model: forward: %w", err)
	}
	losses, err := backend.ReadF32(be, a.losses)
	if err != nil {
		return 0, fmt.Errorf("model: download losses: %w", err)
	}
	var sum float64
	for _, x := range losses {
		sum += float64(x)
	}
	m.state = passLoss
	return float32(sum / float64(N)), nil
}

// Backward adds to the store's gradient buffers the gradient of dlossScale·Σ(per-token losses) of
// the last Forward, which must have had targets. For a mean over a global
// batch pass 1/(B·T·accumulation steps·world size); calling Forward and
// Backward once per micro-batch accumulates.
func (m *Model) Backward(dlossScale float32) error {
	if m.state != passLoss {
		return fmt.Errorf("model: backward needs a Forward with targets first (and runs once per Forward)")
	}
	be, cfg, a, st := m.be, m.cfg, m.acts, m.store
	B, T := a.B, a.T
	N, C, NH := B*T, cfg.C, cfg.NH
	m.state = passNone
	fin := cfg.L + 1

	embP, embG, err := st.Acquire(0, true)
	if err != nil {
		return m.storeErr("acquire", 0, true, err)
	}
	finP, finG, err := st.Acquire(fin, true)
	if err != nil {
		return m.storeErr("acquire", fin, true, err)
	}
	wte, _ := m.embedViews(embP)
	dwte, dwpe := m.embedViews(embG)
	lnfw, _ := m.finalViews(finP)
	dlnfw, dlnfb := m.finalViews(finG)

	// The classifier runs chunk by chunk, the same way with and without
	// checkpointing (which recomputes each chunk's probabilities), so both
	// sum dwte in the same order and give the same bits. dlogits overwrite
	// the probabilities in place.
	Vp := cfg.Vp
	for r0 := 0; r0 < N; r0 += logitChunkRows {
		n := min(logitChunkRows, N-r0)
		lnf, tg, probs := a.lnf.Slice(r0*C, n*C), a.targets.Slice(r0, n), m.probsChunk(r0, n)
		if a.ckpt {
			chunk := a.chunk.Slice(0, n*Vp)
			be.MatmulForward(chunk, lnf, wte, backend.Buffer{}, n, C, Vp)
			be.CrossEntropyForward(a.losses.Slice(r0, n), probs, chunk, tg, n, cfg.V, Vp)
		}
		be.CrossEntropyBackward(probs, probs, tg, dlossScale, n, cfg.V, Vp)
		be.MatmulBackward(a.dbtc.Slice(r0*C, n*C), dwte, backend.Buffer{}, probs, lnf, wte, n, C, Vp)
	}
	lnfIn := m.blockOutput(cfg.L - 1)
	if !a.ckptX.IsNil() { // kept in a host pool: ops read the device
		be.Copy(a.ckptX, lnfIn)
		lnfIn = a.ckptX
	}
	be.LayerNormBackward(a.dres, dlnfw, dlnfb, a.dbtc, lnfIn, lnfw, a.lnfMean, a.lnfRstd, N, C)
	if err := st.Release(fin, true); err != nil {
		return m.storeErr("release", fin, true, err)
	}

	// a.dres is the gradient w.r.t. the stream entering the block above.
	for l := cfg.L - 1; l >= 0; l-- {
		pb, gb, err := st.Acquire(l+1, true)
		if err != nil {
			return m.storeErr("acquire", l+1, true, err)
		}
		bw, bg, ba := m.blockViews(l, pb), m.blockViews(l, gb), m.blockActs(l)
		residual := a.encoded
		if l > 0 {
			residual = m.blockOutput(l - 1)
		}
		if a.ckpt {
			// Recompute the block's forward from its kept input; the same
			// ops on the same input give the same bits as the first time.
			residual = a.saved[l]
			if !a.ckptX.IsNil() {
				be.Copy(a.ckptX, residual)
				residual = a.ckptX
			}
			m.blockForward(ba, residual, bw, B, T)
		}
		// MLP half: residual3 = residual2 + fcproj(gelu(fc(ln2(residual2)))).
		be.MatmulBackward(a.d4a, bg.fcprojw, bg.fcprojb, a.dres, ba.fchGelu, bw.fcprojw, N, 4*C, C)
		be.GeluBackward(a.d4b, ba.fch, a.d4a, N*4*C)
		be.MatmulBackward(a.dbtc, bg.fcw, bg.fcb, a.d4b, ba.ln2, bw.fcw, N, C, 4*C)
		be.LayerNormBackward(a.scratch, bg.ln2w, bg.ln2b, a.dbtc, ba.residual2, bw.ln2w, ba.ln2Mean, ba.ln2Rstd, N, C)
		be.Add(a.dres, a.dres, a.scratch, N*C)
		// Attention half: residual2 = residual + attproj(attn(qkv(ln1(residual)))).
		dqkv := a.d4a.Slice(0, N*3*C)
		be.MatmulBackward(a.dbtc, bg.attprojw, bg.attprojb, a.dres, ba.atty, bw.attprojw, N, C, C)
		be.AttentionBackward(dqkv, a.dbtc, ba.atty, ba.qkv, ba.lse, B, T, NH, NH, C/NH)
		be.MatmulBackward(a.dbtc, bg.qkvw, bg.qkvb, dqkv, ba.ln1, bw.qkvw, N, C, 3*C)
		be.LayerNormBackward(a.scratch, bg.ln1w, bg.ln1b, a.dbtc, residual, bw.ln1w, ba.ln1Mean, ba.ln1Rstd, N, C)
		be.Add(a.dres, a.dres, a.scratch, N*C)
		if err := st.Release(l+1, true); err != nil {
			return m.storeErr("release", l+1, true, err)
		}
	}
	be.EncoderBackward(dwte, dwpe, a.dres, a.inputs, B, T, C)
	if err := st.Release(0, true); err != nil {
		return m.storeErr("release", 0, true, err)
	}
	if err := be.Sync(); err != nil {
		return fmt.Errorf("model: backward: %w", err)
	}
	m.state = passBackward
	return nil
}

// blockForward runs one transformer block from residual (N,C) into ba,
// leaving the block's output in ba.residual3.
func (m *Model) blockForward(ba *blockActs, residual backend.Buffer, bw blockWeights, B, T int) {
	be, a := m.be, m.acts
	N, C, NH := B*T, m.cfg.C, m.cfg.NH
	be.LayerNormForward(ba.ln1, ba.ln1Mean, ba.ln1Rstd, residual, bw.ln1w, bw.ln1b, N, C)
	be.MatmulForward(ba.qkv, ba.ln1, bw.qkvw, bw.qkvb, N, C, 3*C)
	be.AttentionForward(ba.atty, ba.lse, ba.qkv, B, T, NH, NH, C/NH)
	be.MatmulForward(a.scratch, ba.atty, bw.attprojw, bw.attprojb, N, C, C)
	if f, ok := be.(backend.ResidualLayerNormer); ok {
		f.ResidualLayerNormForward(ba.residual2, ba.ln2, ba.ln2Mean, ba.ln2Rstd, residual, a.scratch, bw.ln2w, bw.ln2b, N, C)
	} else {
		be.Add(ba.residual2, residual, a.scratch, N*C)
		be.LayerNormForward(ba.ln2, ba.ln2Mean, ba.ln2Rstd, ba.residual2, bw.ln2w, bw.ln2b, N, C)
	}
	be.MatmulForward(ba.fch, ba.ln2, bw.fcw, bw.fcb, N, C, 4*C)
	be.GeluForward(ba.fchGelu, ba.fch, N*4*C)
	be.MatmulForward(a.scratch, ba.fchGelu, bw.fcprojw, bw.fcprojb, N, 4*C, C)
	be.Add(ba.residual3, ba.residual2, a.scratch, N*C)
}

// blockActs is where block l's activations live: its own set, or with
// checkpointing the one set every block shares.
func (m *Model) blockActs(l int) *blockActs {
	if m.acts.ckpt {
		return &m.acts.blocks[0]
	}
	return &m.acts.blocks[l]
}

// blockOutput is block l's output as kept for backward.
func (m *Model) blockOutput(l int) backend.Buffer {
	if m.acts.ckpt {
		return m.acts.saved[l+1]
	}
	return m.acts.blocks[l].residual3
}

// probsChunk is where rows [r0, r0+n) of the probabilities live.
func (m *Model) probsChunk(r0, n int) backend.Buffer {
	Vp := m.cfg.Vp
	if m.acts.ckpt {
		return m.acts.probs.Slice(0, n*Vp)
	}
	return m.acts.logits.Slice(r0*Vp, n*Vp)
}

// checkBatch rejects what would otherwise index out of bounds on a device.
func (m *Model) checkBatch(inputs, targets []int32, B, T int) error {
	if B < 1 || T < 1 || T > m.cfg.MaxT {
		return fmt.Errorf("model: batch %d×%d: want B ≥ 1 and 1 ≤ T ≤ %d (the model's n_positions)", B, T, m.cfg.MaxT)
	}
	if len(inputs) != B*T || (targets != nil && len(targets) != B*T) {
		return fmt.Errorf("model: batch %d×%d needs %d inputs and targets, got %d and %d", B, T, B*T, len(inputs), len(targets))
	}
	for _, s := range [2][]int32{inputs, targets} {
		for i, id := range s {
			if id < 0 || int(id) >= m.cfg.V {
				return fmt.Errorf("model: token id %d at position %d is outside the vocabulary [0, %d)", id, i, m.cfg.V)
			}
		}
	}
	return nil
}
