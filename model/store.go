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
// forward pass acquires each group, in order, for as long as it uses it
// (the embeddings stay acquired until the classifier is done). A backward
// pass acquires the embeddings and the final norm first, then each block
// from the last, and releases each group as soon as its gradient
// contribution of the micro-batch is complete.
type ParamStore interface {
	// Acquire returns group g's parameters and, for backward, the buffer
	// its gradients accumulate into (parameter gradients are +=); forward
	// gets the zero Buffer for them.
	Acquire(g int, backward bool) (params, grads backend.Buffer, err error)
	// Release ends the use of group g's parameters and, for backward, says
	// its gradients of this micro-batch are complete.
	Release(g int, backward bool) error
}

// groupViews are views of one group's tensors in a buffer that starts at the
// group's first element.
func (m *Model) groupViews(g int, buf backend.Buffer) map[string]backend.Buffer {
	off, n := m.layout.GroupRange(g)
	if buf.Len() < n {
		panic("model: group buffer shorter than the group")
	}
	out := map[string]backend.Buffer{}
	for _, t := range m.layout.GroupTensors(g) {
		out[t.Name] = buf.Slice(t.Offset-off, t.Len)
	}
	return out
}

func (m *Model) embedViews(buf backend.Buffer) (wte, wpe backend.Buffer) {
	v := m.groupViews(0, buf)
	return v["wte.weight"], v["wpe.weight"]
}

func (m *Model) finalViews(buf backend.Buffer) (w, b backend.Buffer) {
	v := m.groupViews(m.cfg.L+1, buf)
	return v["ln_f.weight"], v["ln_f.bias"]
}

func (m *Model) blockViews(l int, buf backend.Buffer) blockWeights {
	v := m.groupViews(l+1, buf)
	p := func(s string) backend.Buffer { return v[fmt.Sprintf("h.%d.%s", l, s)] }
	return blockWeights{
		ln1w: p("ln_1.weight"), ln1b: p("ln_1.bias"),
		qkvw: p("attn.c_attn.weight"), qkvb: p("attn.c_attn.bias"),
		attprojw: p("attn.c_proj.weight"), attprojb: p("attn.c_proj.bias"),
		ln2w: p("ln_2.weight"), ln2b: p("ln_2.bias"),
		fcw: p("mlp.c_fc.weight"), fcb: p("mlp.c_fc.bias"),
		fcprojw: p("mlp.c_proj.weight"), fcprojb: p("mlp.c_proj.bias"),
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
		name = "final layernorm"
	}
	return fmt.Errorf("model: %s %s parameters (%s): %w", what, name, pass, err)
}
