package model

import (
	"fmt"

	"github.com/gotrain/gotrain/backend"
)

// ParamStore supplies the model's parameters and gradient buffers one
// parameter group at a time (Layout.GroupRange), in the order
// Layout.AcquisitionOrder gives. The buffers it returns are indexed from
// the group's first element. A ZeRO engine (zero.Engine) implements it: it
// gathers partitioned parameters just before their use and reduces a
// group's gradients as soon as backward has produced them; with one rank
// and stage 0 it simply hands out slices of whole buffers.
//
// Every Acquire is paired with a Release of the same group and pass. A
// forward pass acquires each group, in order, for as long as it uses it (a
// tied head keeps the embeddings acquired until the classifier is done). A
// backward pass acquires the groups in Layout.AcquisitionOrder and
// releases each as soon as its gradient contribution of the micro-batch is
// complete.
type ParamStore interface {
	// Acquire returns group g's parameters and, for backward, the buffer
	// its gradients accumulate into (parameter gradients are +=); forward
	// gets the zero Buffer for them.
	Acquire(g int, backward bool) (params, grads backend.Buffer, err error)
	// Release ends the use of group g's parameters and, for backward, says
	// its gradients of this micro-batch are complete.
	Release(g int, backward bool) error
}

// checkGroupBuf panics unless buf holds group g (a store bug). The zero
// Buffer passes: a frozen group's gradients, whose views are all zero.
func (m *Model) checkGroupBuf(g int, buf backend.Buffer) {
	if buf.IsNil() {
		return
	}
	if _, n := m.layout.GroupRange(g); buf.Len() < n {
		panic("model: group buffer shorter than the group")
	}
}

// embedViews are the token embedding (Vp,C) and GPT-2's position table
// (MaxT,C; the zero Buffer for RoPE models) in group 0's buffer.
func (m *Model) embedViews(buf backend.Buffer) (wte, wpe backend.Buffer) {
	m.checkGroupBuf(0, buf)
	r := &m.layout.roles
	return r[roleEmbed].view(buf), r[rolePos].view(buf)
}

// finalViews are the final norm's weight and bias (bias: LayerNorm only)
// and the untied head (Vp,C) in group L+1's buffer.
func (m *Model) finalViews(buf backend.Buffer) (w, b, head backend.Buffer) {
	m.checkGroupBuf(m.cfg.L+1, buf)
	r := &m.layout.roles
	return r[roleFinalW].view(buf), r[roleFinalB].view(buf), r[roleHead].view(buf)
}

// blockViews are block l's weights in group l+1's buffer, fused where the
// forward pass multiplies them as one matrix (the layout keeps those
// tensors adjacent).
func (m *Model) blockViews(l int, buf backend.Buffer) blockWeights {
	m.checkGroupBuf(l+1, buf)
	r, C := &m.layout.roles, m.cfg.C
	QKV, U := m.cfg.QKVWidth(), m.cfg.upWidth()
	fused := func(first role, n int) backend.Buffer {
		if r[first].n == 0 {
			return backend.Buffer{}
		}
		return span{r[first].off, n}.view(buf)
	}
	return blockWeights{
		ln1w: r[roleNorm1W].view(buf), ln1b: r[roleNorm1B].view(buf),
		qkvw: fused(roleQ, QKV*C), qkvb: fused(roleQB, QKV),
		qnorm: r[roleQNorm].view(buf), knorm: r[roleKNorm].view(buf),
		ow: r[roleO].view(buf), ob: r[roleOB].view(buf),
		ln2w: r[roleNorm2W].view(buf), ln2b: r[roleNorm2B].view(buf),
		upw: fused(roleUp, U*C), upb: fused(roleUpB, U),
		downw: r[roleDown].view(buf), downb: r[roleDownB].view(buf),
	}
}

// storeErr names the group and pass in a store failure.
func (m *Model) storeErr(what string, g int, backward bool, err error) error {
	pass := "forward"
	if backward {
		pass = "backward"
	}
	name := "embeddings"
	switch {
	case g >= 1 && g <= m.cfg.L:
		name = fmt.Sprintf("block %d", g-1)
	case g == m.cfg.L+1:
		name = "final norm"
	}
	return fmt.Errorf("model: %s %s parameters (%s): %w", what, name, pass, err)
}
