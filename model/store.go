package model

import (
	"fmt"

	"github.com/gotrain/gotrain/backend"
)

// ParamStore supplies the model's parameters and gradient buffers one
// parameter group at a time (Layout.GroupRange): group 0 the embeddings,
// 1..L the blocks, L+1 the final LayerNorm. The buffers it returns are
// indexed from the group's first element. A ZeRO engine implements it to
// gather partitioned parameters just before use (stage 3) and to reduce a
// group's gradients as soon as backward has produced them (stage 2).
//
// Call order within one Forward: Acquire(0), then for each block g
// Acquire(g) … Release(g), then Acquire(L+1) … Release(L+1), and Release(0)
// after the classifier. Within one Backward: Acquire(0) and Acquire(L+1);
// AcquireGrads(0) and AcquireGrads(L+1); Release(L+1) and GradsReady(L+1)
// after the final LayerNorm; for each block from the last, Acquire(g),
// AcquireGrads(g), Release(g), GradsReady(g); finally Release(0) and
// GradsReady(0) after the encoder. backward says which pass asks.
type ParamStore interface {
	AcquireParams(g int, backward bool) (backend.Buffer, error)
	ReleaseParams(g int, backward bool) error
	// AcquireGrads returns the buffer group g's gradients accumulate into
	// (parameter gradients are +=).
	AcquireGrads(g int) (backend.Buffer, error)
	// GradsReady says group g's gradient contribution of this micro-batch
	// is complete.
	GradsReady(g int) error
}

// flatStore is the model's own store: every parameter and gradient in one
// resident flat buffer (no ZeRO, or ZeRO stages 0 and 1).
type flatStore struct {
	lay           *Layout
	params, grads backend.Buffer
}

func (s *flatStore) AcquireParams(g int, _ bool) (backend.Buffer, error) {
	off, n := s.lay.GroupRange(g)
	return s.params.Slice(off, n), nil
}

func (s *flatStore) ReleaseParams(int, bool) error { return nil }

func (s *flatStore) AcquireGrads(g int) (backend.Buffer, error) {
	off, n := s.lay.GroupRange(g)
	return s.grads.Slice(off, n), nil
}

func (s *flatStore) GradsReady(int) error { return nil }

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
