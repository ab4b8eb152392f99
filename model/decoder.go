package model

import (
	"fmt"

	"github.com/gotrain/gotrain/backend"
)

// Forward runs the model on inputs (B·T token ids, row-major (B,T)) and,
// when targets (B·T ids) is not nil, the cross-entropy loss, returning the
// mean over the targets that are not ignored (0 without targets, or when
// all are ignored). A negative target (PyTorch's ignore_index -100, a
// masked prompt or padding) is ignored: it adds nothing to the loss and
// its row gets no gradient in Backward; without ignored targets the mean
// is over all B·T tokens, bit for bit as before. T may be anything
// Config.CheckSeqLen accepts; a new (B,T) re-lays out the activations,
// reallocating only when it needs more memory than is held.
//
// Graph, one for the whole family: x = embed[inp] (+ wpe for GPT-2); per
// block x += o(attn(rope(qkv(norm1(x))))) and x += down(act(up(norm2(x))))
// (GPT-2: LayerNorm, no RoPE, gelu over c_fc; Llama family: RMSNorm, RoPE
// with Qwen3's q/k norms, SwiGLU over [gate | up]); logits = norm(x)·headᵀ
// over Vp columns (head: the embedding when tied, else lm_head); softmax
// and loss over the first V columns only.
func (m *Model) Forward(inputs, targets []int32, B, T int) (float32, error) {
	return m.forward(inputs, targets, B, T, backend.Buffer{})
}

// ForwardQueued is Forward with targets that waits for nothing: it adds
// the sum of the B·T per-token losses to lossSum (F32, one element, on the
// device) instead of reading them back, so a trainer reads the loss of all
// its micro-batches once per optimizer step.
func (m *Model) ForwardQueued(inputs, targets []int32, B, T int, lossSum backend.Buffer) error {
	if targets == nil || lossSum.Len() != 1 || lossSum.DType() != backend.F32 {
		return fmt.Errorf("model: a queued forward needs targets and an F32 loss accumulator of one element")
	}
	_, err := m.forward(inputs, targets, B, T, lossSum)
	return err
}

func (m *Model) forward(inputs, targets []int32, B, T int, lossSum backend.Buffer) (float32, error) {
	if err := m.checkBatch(inputs, targets, B, T); err != nil {
		return 0, err
	}
	if m.acts == nil || m.acts.B != B || m.acts.T != T {
		if err := m.ReserveActivations(B, T); err != nil {
			return 0, err
		}
	}
	m.state = passNone
	if m.lora != nil {
		m.lora.startPass()
	}
	be, cfg, a := m.be, m.cfg, m.acts
	N, C := B*T, cfg.C
	if err := backend.WriteI32(be, a.inputs, inputs); err != nil {
		return 0, fmt.Errorf("model: upload inputs: %w", err)
	}
	if targets != nil {
		if err := backend.WriteI32(be, a.targets, m.deviceTargets(targets)); err != nil {
			return 0, fmt.Errorf("model: upload targets: %w", err)
		}
	}
	m.pads = m.pads[:0]
	if cfg.PadID >= 0 {
		for i, id := range inputs {
			if int(id) == cfg.PadID {
				m.pads = append(m.pads, int32(i))
			}
		}
	}

	st, tied, fin := m.store, cfg.TiedHead, cfg.L+1
	embBuf, _, err := st.Acquire(0, false)
	if err != nil {
		return 0, m.storeErr("acquire", 0, false, err)
	}
	wte, wpe := m.embedViews(embBuf)
	be.EncoderForward(a.encoded, a.inputs, wte, wpe, B, T, C)
	if !tied {
		if err := st.Release(0, false); err != nil {
			return 0, m.storeErr("release", 0, false, err)
		}
	}
	residual := a.encoded
	for l := range cfg.L {
		pb, _, err := st.Acquire(l+1, false)
		if err != nil {
			return 0, m.storeErr("acquire", l+1, false, err)
		}
		if a.ckpt {
			be.Copy(a.saved[l], residual)
		}
		ba, bw := m.blockActs(l), m.blockViews(l, pb)
		if bw.lora, _, err = m.acquireAdapters(l, false); err != nil {
			return 0, err
		}
		m.blockForward(ba, residual, bw, B, T)
		residual = ba.residual3
		if err := m.releaseAdapters(l, false); err != nil {
			return 0, err
		}
		if err := st.Release(l+1, false); err != nil {
			return 0, m.storeErr("release", l+1, false, err)
		}
	}
	if a.ckpt {
		be.Copy(a.saved[cfg.L], residual)
	}
	fb, _, err := st.Acquire(fin, false)
	if err != nil {
		return 0, m.storeErr("acquire", fin, false, err)
	}
	lnfw, lnfb, head := m.finalViews(fb)
	m.normForward(a.lnf, a.lnfMean, a.lnfRstd, residual, lnfw, lnfb, N)
	// The group holding the head stays acquired through the classifier.
	headGroup := fin
	if tied {
		head, headGroup = wte, 0
		if err := st.Release(fin, false); err != nil {
			return 0, m.storeErr("release", fin, false, err)
		}
	}
	if targets == nil {
		if a.ckpt {
			return 0, fmt.Errorf("model: a forward without targets keeps every logit, which activation checkpointing does not; use a model without checkpointing to sample")
		}
		be.MatmulForward(a.logits, a.lnf, head, backend.Buffer{}, N, C, cfg.Vp)
		if err := st.Release(headGroup, false); err != nil {
			return 0, m.storeErr("release", headGroup, false, err)
		}
		if err := be.Sync(); err != nil {
			return 0, fmt.Errorf("model: forward: %w", err)
		}
		m.state = passLogits
		return 0, nil
	}
	Vp, rows := cfg.Vp, m.logitRows()
	for r0 := 0; r0 < N; r0 += rows {
		n := min(rows, N-r0)
		chunk := m.logitsChunk(r0, n)
		be.MatmulForward(chunk, a.lnf.Slice(r0*C, n*C), head, backend.Buffer{}, n, C, Vp)
		be.FusedClassifier(a.losses.Slice(r0, n), chunk, a.targets.Slice(r0, n), 0, n, cfg.V, Vp)
	}
	if err := st.Release(headGroup, false); err != nil {
		return 0, m.storeErr("release", headGroup, false, err)
	}
	m.state = passLoss
	m.zeroIgnored(a.losses, 0, N, 1)
	if !lossSum.IsNil() {
		be.AddSum(lossSum, a.losses)
		return 0, nil
	}
	if err := be.Sync(); err != nil {
		return 0, fmt.Errorf("model: forward: %w", err)
	}
	losses, err := backend.ReadF32(be, a.losses)
	if err != nil {
		return 0, fmt.Errorf("model: download losses: %w", err)
	}
	var sum float64
	count := N
	if len(m.ignored) == 0 {
		for _, x := range losses {
			sum += float64(x)
		}
	} else {
		for i, x := range losses {
			if targets[i] >= 0 {
				sum += float64(x)
			}
		}
		count -= ignoredCount(m.ignored)
	}
	if count == 0 {
		return 0, nil
	}
	return float32(sum / float64(count)), nil
}

// deviceTargets records the runs of ignored (negative) targets and returns
// what the device's cross-entropy sees: the targets, with each ignored one
// replaced by class 0 (its loss is left out and its gradient row zeroed by
// Backward), so the backend ops keep their contract of in-range targets.
func (m *Model) deviceTargets(targets []int32) []int32 {
	m.ignored = m.ignored[:0]
	for i := 0; i < len(targets); i++ {
		if targets[i] >= 0 {
			continue
		}
		j := i
		for j < len(targets) && targets[j] < 0 {
			j++
		}
		m.ignored = append(m.ignored, [2]int32{int32(i), int32(j)})
		i = j
	}
	if len(m.ignored) == 0 {
		return targets
	}
	m.tgDev = append(m.tgDev[:0], targets...)
	for _, r := range m.ignored {
		clear(m.tgDev[r[0]:r[1]])
	}
	return m.tgDev
}

// ignoredCount is the number of rows the runs cover.
func ignoredCount(runs [][2]int32) int {
	n := 0
	for _, r := range runs {
		n += int(r[1] - r[0])
	}
	return n
}

// zeroIgnored zeroes the gradient rows (dlogits, (n,Vp) from row r0) of
// the ignored targets among rows [r0, r0+n): one op per run, and chat
// data's ignored targets come in a few runs per row (prompt, padding).
// With width 1 and r0 0 it zeroes the ignored rows' losses, so a sum of
// the losses on the device (ForwardQueued) leaves them out too.
func (m *Model) zeroIgnored(rows backend.Buffer, r0, n, width int) {
	for _, r := range m.ignored {
		lo, hi := max(int(r[0]), r0), min(int(r[1]), r0+n)
		if lo < hi {
			m.be.Zero(rows.Slice((lo-r0)*width, (hi-lo)*width))
		}
	}
}

// Backward adds to the store's gradient buffers the gradient of dlossScale·Σ(per-token losses) of
// the last Forward, which must have had targets. For a mean over a global
// batch pass 1/(B·T·accumulation steps·world size); calling Forward and
// Backward once per micro-batch accumulates. It queues the work and waits
// for nothing: the backend's next Sync reports a device failure.
func (m *Model) Backward(dlossScale float32) error {
	if m.state != passLoss {
		return fmt.Errorf("model: backward needs a Forward with targets first (and runs once per Forward)")
	}
	be, cfg, a, st := m.be, m.cfg, m.acts, m.store
	B, T := a.B, a.T
	N, C := B*T, cfg.C
	m.state = passNone
	fin, tied := cfg.L+1, cfg.TiedHead

	// Tied: the embeddings first, for the classifier; untied: last, for
	// the lookup (Layout.AcquisitionOrder).
	var embP, embG backend.Buffer
	var err error
	if tied {
		if embP, embG, err = st.Acquire(0, true); err != nil {
			return m.storeErr("acquire", 0, true, err)
		}
		if err = m.checkGrads(0, embG); err != nil {
			return err
		}
	}
	finP, finG, err := st.Acquire(fin, true)
	if err != nil {
		return m.storeErr("acquire", fin, true, err)
	}
	if err = m.checkGrads(fin, finG); err != nil {
		return err
	}
	lnfw, _, head := m.finalViews(finP)
	dlnfw, dlnfb, dhead := m.finalViews(finG)
	if tied {
		head, _ = m.embedViews(embP)
		dhead, _ = m.embedViews(embG)
	}

	// The classifier runs block by block: 256-row chunks under
	// checkpointing (which recomputes each chunk's logits), 2,048-row
	// blocks without (see LogitBlockRows: dhead sums the same slabs in the
	// same order, so both give the same bits). The fused classifier
	// overwrites the logits with dlogits in their own dtype, so a 16-bit
	// model's head GEMMs stay 16-bit.
	Vp, rows := cfg.Vp, m.logitRows()
	for r0 := 0; r0 < N; r0 += rows {
		n := min(rows, N-r0)
		lnf, tg, dlogits := a.lnf.Slice(r0*C, n*C), a.targets.Slice(r0, n), m.logitsChunk(r0, n)
		if a.ckpt {
			be.MatmulForward(dlogits, lnf, head, backend.Buffer{}, n, C, Vp)
		}
		be.FusedClassifier(a.losses.Slice(r0, n), dlogits, tg, dlossScale, n, cfg.V, Vp)
		m.zeroIgnored(dlogits, r0, n, Vp)
		be.MatmulBackward(a.dbtc.Slice(r0*C, n*C), dhead, backend.Buffer{}, dlogits, lnf, head, n, C, Vp)
	}
	lnfIn := m.blockOutput(cfg.L - 1)
	if !a.ckptX.IsNil() { // kept in a host pool: ops read the device
		be.Copy(a.ckptX, lnfIn)
		lnfIn = a.ckptX
	}
	m.normBackward(a.dres, dlnfw, dlnfb, a.dbtc.Slice(0, N*C), lnfIn, lnfw, a.lnfMean, a.lnfRstd, N)
	if err := st.Release(fin, true); err != nil {
		return m.storeErr("release", fin, true, err)
	}

	// a.dres is the gradient w.r.t. the stream entering the block above.
	for l := cfg.L - 1; l >= 0; l-- {
		pb, gb, err := st.Acquire(l+1, true)
		if err != nil {
			return m.storeErr("acquire", l+1, true, err)
		}
		if err = m.checkGrads(l+1, gb); err != nil {
			return err
		}
		bw, bg, ba := m.blockViews(l, pb), m.blockViews(l, gb), m.blockActs(l)
		if bw.lora, bg.lora, err = m.acquireAdapters(l, true); err != nil {
			return err
		}
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
		m.blockBackward(ba, residual, bw, bg, B, T)
		if err := m.releaseAdapters(l, true); err != nil {
			return err
		}
		if err := st.Release(l+1, true); err != nil {
			return m.storeErr("release", l+1, true, err)
		}
	}
	if !tied {
		if _, embG, err = st.Acquire(0, true); err != nil {
			return m.storeErr("acquire", 0, true, err)
		}
		if err = m.checkGrads(0, embG); err != nil {
			return err
		}
	}
	// transformers' embedding has padding_idx = pad_token_id: positions
	// holding it add nothing to their row's gradient.
	for _, p := range m.pads {
		be.Zero(a.dres.Slice(int(p)*C, C))
	}
	dwte, dwpe := m.embedViews(embG)
	be.EncoderBackward(dwte, dwpe, a.dres, a.inputs, B, T, C)
	if err := st.Release(0, true); err != nil {
		return m.storeErr("release", 0, true, err)
	}
	m.state = passBackward
	return nil
}

// blockForward runs one transformer block from residual (N,C) into ba,
// leaving the block's output in ba.residual3.
func (m *Model) blockForward(ba *blockActs, residual backend.Buffer, bw blockWeights, B, T int) {
	be, a, cfg := m.be, m.acts, m.cfg
	N, C, NH, KV, HD := B*T, cfg.C, cfg.NH, cfg.KV, cfg.HD
	QKV, A, U := cfg.QKVWidth(), cfg.AttnWidth(), cfg.upWidth()
	m.normForward(ba.ln1, ba.ln1Mean, ba.ln1Rstd, residual, bw.ln1w, bw.ln1b, N)
	be.MatmulForward(ba.qkv, ba.ln1, bw.qkvw, bw.qkvb, N, C, QKV)
	m.loraForward(slotQKV, ba.qkv, ba.ln1, bw.lora, N)
	if cfg.Pos == RotaryPositions {
		m.dec.QKVRotaryForward(ba.qkvr, ba.qkRstd, ba.qkv, bw.qnorm, bw.knorm, a.cos, a.sin, B, T, NH, KV, HD, m.eps)
	}
	be.AttentionForward(ba.atty, ba.lse, ba.qkvr, B, T, NH, KV, HD)
	be.MatmulForward(a.scratch, ba.atty, bw.ow, bw.ob, N, A, C)
	m.loraForward(slotO, a.scratch, ba.atty, bw.lora, N)
	m.residualNormForward(ba.residual2, ba.ln2, ba.ln2Mean, ba.ln2Rstd, residual, a.scratch, bw.ln2w, bw.ln2b, N)
	be.MatmulForward(ba.fch, ba.ln2, bw.upw, bw.upb, N, C, U)
	m.loraForward(slotUp, ba.fch, ba.ln2, bw.lora, N)
	if cfg.Act == SwiGLU {
		m.dec.SwiGLUForward(ba.fchAct, ba.fch, N, cfg.FF)
	} else {
		be.GeluForward(ba.fchAct, ba.fch, N*U)
	}
	be.MatmulForward(a.scratch, ba.fchAct, bw.downw, bw.downb, N, cfg.FF, C)
	m.loraForward(slotDown, a.scratch, ba.fchAct, bw.lora, N)
	be.Add(ba.residual3, ba.residual2, a.scratch, N*C)
}

// blockBackward adds block l's parameter gradients to bg and turns a.dres,
// the gradient w.r.t. the block's output, into the gradient w.r.t. its
// input residual.
func (m *Model) blockBackward(ba *blockActs, residual backend.Buffer, bw, bg blockWeights, B, T int) {
	be, a, cfg := m.be, m.acts, m.cfg
	N, C, NH, KV, HD, F := B*T, cfg.C, cfg.NH, cfg.KV, cfg.HD, cfg.FF
	QKV, A, U := cfg.QKVWidth(), cfg.AttnWidth(), cfg.upWidth()
	dAct, dUp := a.d4a.Slice(0, N*F), a.d4b.Slice(0, N*U)
	dln := a.dbtc.Slice(0, N*C)
	// MLP half: residual3 = residual2 + down(act(up(norm2(residual2)))).
	be.MatmulBackward(dAct, bg.downw, bg.downb, a.dres, ba.fchAct, bw.downw, N, F, C)
	m.loraBackward(slotDown, dAct, a.dres, ba.fchAct, bw.lora, bg.lora, N)
	if cfg.Act == SwiGLU {
		m.dec.SwiGLUBackward(dUp, dAct, ba.fch, N, F)
	} else {
		be.GeluBackward(dUp, ba.fch, dAct, N*U)
	}
	be.MatmulBackward(dln, bg.upw, bg.upb, dUp, ba.ln2, bw.upw, N, C, U)
	m.loraBackward(slotUp, dln, dUp, ba.ln2, bw.lora, bg.lora, N)
	m.normBackward(a.scratch, bg.ln2w, bg.ln2b, dln, ba.residual2, bw.ln2w, ba.ln2Mean, ba.ln2Rstd, N)
	be.Add(a.dres, a.dres, a.scratch, N*C)
	// Attention half: residual2 = residual + o(attn(rope(qkv(norm1(residual))))).
	datty := a.dbtc.Slice(0, N*A)
	dqkvr := a.d4a.Slice(0, N*QKV)
	be.MatmulBackward(datty, bg.ow, bg.ob, a.dres, ba.atty, bw.ow, N, A, C)
	m.loraBackward(slotO, datty, a.dres, ba.atty, bw.lora, bg.lora, N)
	be.AttentionBackward(dqkvr, datty, ba.atty, ba.qkvr, ba.lse, B, T, NH, KV, HD)
	dqkv := dqkvr
	if cfg.Pos == RotaryPositions {
		if cfg.QKNorm { // the norms' backward cannot run in place
			dqkv = a.d4b.Slice(0, N*QKV)
		}
		m.dec.QKVRotaryBackward(dqkv, bg.qnorm, bg.knorm, dqkvr, ba.qkv, bw.qnorm, bw.knorm, ba.qkRstd, a.cos, a.sin, B, T, NH, KV, HD)
	}
	be.MatmulBackward(dln, bg.qkvw, bg.qkvb, dqkv, ba.ln1, bw.qkvw, N, C, QKV)
	m.loraBackward(slotQKV, dln, dqkv, ba.ln1, bw.lora, bg.lora, N)
	m.normBackward(a.scratch, bg.ln1w, bg.ln1b, dln, residual, bw.ln1w, ba.ln1Mean, ba.ln1Rstd, N)
	be.Add(a.dres, a.dres, a.scratch, N*C)
}

// normForward is the config's norm over N rows of C: LayerNorm (w, b;
// mean and rstd saved) or RMSNorm (w; rstd saved, mean and b unused).
func (m *Model) normForward(out, mean, rstd, inp, w, b backend.Buffer, N int) {
	if m.cfg.Norm == RMSNorm {
		m.dec.RMSNormForward(out, rstd, inp, w, N, m.cfg.C, m.eps)
		return
	}
	m.be.LayerNormForward(out, mean, rstd, inp, w, b, N, m.cfg.C)
}

// normBackward is normForward's backward: dinp =, dw (and db) +=.
func (m *Model) normBackward(dinp, dw, db, dout, inp, w, mean, rstd backend.Buffer, N int) {
	if m.cfg.Norm == RMSNorm {
		m.dec.RMSNormBackward(dinp, dw, dout, inp, w, rstd, N, m.cfg.C)
		return
	}
	m.be.LayerNormBackward(dinp, dw, db, dout, inp, w, mean, rstd, N, m.cfg.C)
}

// residualNormForward is residual = x + y, then normForward of it, fused
// when the backend offers it (the results are the same).
func (m *Model) residualNormForward(residual, out, mean, rstd, x, y, w, b backend.Buffer, N int) {
	C := m.cfg.C
	if m.cfg.Norm == RMSNorm {
		m.dec.ResidualRMSNormForward(residual, out, rstd, x, y, w, N, C, m.eps)
		return
	}
	if f, ok := m.be.(backend.ResidualLayerNormer); ok {
		f.ResidualLayerNormForward(residual, out, mean, rstd, x, y, w, b, N, C)
		return
	}
	m.be.Add(residual, x, y, N*C)
	m.be.LayerNormForward(out, mean, rstd, residual, w, b, N, C)
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

// logitRows is how many rows one classifier GEMM takes.
func (m *Model) logitRows() int {
	if m.acts.ckpt {
		return LogitChunkRows
	}
	return LogitBlockRows
}

// logitsChunk is where rows [r0, r0+n) of the logits (then dlogits) live.
func (m *Model) logitsChunk(r0, n int) backend.Buffer {
	Vp := m.cfg.Vp
	if m.acts.ckpt {
		return m.acts.chunk.Slice(0, n*Vp)
	}
	return m.acts.logits.Slice(r0*Vp, n*Vp)
}

// checkBatch rejects what would otherwise index out of bounds on a device.
func (m *Model) checkBatch(inputs, targets []int32, B, T int) error {
	if B < 1 {
		return fmt.Errorf("model: batch %d×%d: want B ≥ 1", B, T)
	}
	if err := m.cfg.CheckSeqLen(T); err != nil {
		return fmt.Errorf("model: batch %d×%d: %w", B, T, err)
	}
	if len(inputs) != B*T || (targets != nil && len(targets) != B*T) {
		return fmt.Errorf("model: batch %d×%d needs %d inputs and targets, got %d and %d", B, T, B*T, len(inputs), len(targets))
	}
	for k, s := range [2][]int32{inputs, targets} {
		for i, id := range s {
			// A negative target is an ignored one (see Forward).
			if (id < 0 && k == 0) || int(id) >= m.cfg.V {
				return fmt.Errorf("model: token id %d at position %d is outside the vocabulary [0, %d)", id, i, m.cfg.V)
			}
		}
	}
	return nil
}
