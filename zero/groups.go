package zero

import "fmt"

// Tensor is one parameter tensor of the model's flat layout: elements
// [Off, Off+Len), and whether AdamW's weight decay applies to it.
type Tensor struct {
	Off, Len int
	Decay    bool
}

// Group is one unit the engine gathers, reduces and partitions: elements
// [Off, Off+Len) of the flat layout, tiled in order by its Tensors. The
// groups of a Layout tile the whole flat layout in order (LayoutOf converts
// a model's: for its decoders the embeddings, the blocks, the final norm and head).
type Group struct {
	Off, Len int
	Tensors  []Tensor
}

// Layout is what the engine knows of a model: its parameter groups, which
// tile the flat layout in order, and the order in which the model acquires
// them in a forward and in a backward pass (each a permutation of the group
// indices). Stage 3 prefetches and keeps gathered groups by that order.
type Layout struct {
	Groups            []Group
	Forward, Backward []int
}

// ModelLayout is what a model's layout offers (model.Layout implements it),
// so the engine takes the groups and their order from the model, never from
// its own knowledge of one.
type ModelLayout interface {
	NumGroups() int
	// GroupRange is group g's range of the flat layout.
	GroupRange(g int) (off, n int)
	// GroupSpans calls f for each of group g's tensors, in order: its range
	// of the flat layout and whether AdamW's weight decay applies to it.
	GroupSpans(g int, f func(off, n int, decay bool))
	// AcquisitionOrder lists the groups in the order a forward (backward
	// false) or backward pass acquires them.
	AcquisitionOrder(backward bool) []int
}

// LayoutOf describes a model's layout to the engine.
func LayoutOf(m ModelLayout) Layout {
	lay := Layout{Groups: make([]Group, m.NumGroups()), Forward: m.AcquisitionOrder(false), Backward: m.AcquisitionOrder(true)}
	for g := range lay.Groups {
		off, n := m.GroupRange(g)
		gr := Group{Off: off, Len: n}
		m.GroupSpans(g, func(off, n int, decay bool) { gr.Tensors = append(gr.Tensors, Tensor{Off: off, Len: n, Decay: decay}) })
		lay.Groups[g] = gr
	}
	return lay
}

// check verifies the groups (checkGroups) and that both orders are
// permutations of the group indices, and returns the total length.
func (lay Layout) check() (int, error) {
	total, err := checkGroups(lay.Groups)
	if err != nil {
		return 0, err
	}
	for _, o := range []struct {
		name  string
		order []int
	}{{"forward", lay.Forward}, {"backward", lay.Backward}} {
		seen := make([]bool, len(lay.Groups))
		for _, g := range o.order {
			if g < 0 || g >= len(seen) || seen[g] {
				return 0, fmt.Errorf("zero: the %s acquisition order %v is not a permutation of the %d groups", o.name, o.order, len(seen))
			}
			seen[g] = true
		}
		if len(o.order) != len(seen) {
			return 0, fmt.Errorf("zero: the %s acquisition order %v is not a permutation of the %d groups", o.name, o.order, len(seen))
		}
	}
	return total, nil
}

// inverse maps each group to its index in order.
func inverse(order []int) []int {
	pos := make([]int, len(order))
	for i, g := range order {
		pos[g] = i
	}
	return pos
}

// checkGroups verifies that groups tile [0, total) in order and that each
// group's tensors tile the group, and returns total.
func checkGroups(groups []Group) (int, error) {
	if len(groups) == 0 {
		return 0, fmt.Errorf("zero: no parameter groups")
	}
	total := 0
	for g, gr := range groups {
		if gr.Off != total || gr.Len < 0 {
			return 0, fmt.Errorf("zero: group %d covers [%d, %d) but the groups so far end at %d; groups must tile the parameters in order", g, gr.Off, gr.Off+gr.Len, total)
		}
		at := gr.Off
		for i, t := range gr.Tensors {
			if t.Off != at || t.Len < 0 {
				return 0, fmt.Errorf("zero: tensor %d of group %d covers [%d, %d) but should start at %d; tensors must tile their group in order", i, g, t.Off, t.Off+t.Len, at)
			}
			at += t.Len
		}
		if at != gr.Off+gr.Len {
			return 0, fmt.Errorf("zero: the tensors of group %d end at %d, the group at %d", g, at, gr.Off+gr.Len)
		}
		total += gr.Len
	}
	return total, nil
}

// segment is a run of a rank's owned elements that takes one AdamW call: n
// elements at off in the state buffers (the partition for stages ≥ 1, the
// flat buffer for stage 0), all with the same decay setting and within one
// group.
type segment struct {
	off, n int
	decay  bool
}

// segments cuts rank's share of every group into AdamW runs: each tensor
// intersected with the rank's owned range, adjacent pieces with the same
// decay merged. Padding is in no tensor, so it is never updated. The result
// is indexed by group.
func segments(groups []Group, p Plan, rank int) [][]segment {
	out := make([][]segment, len(groups))
	for g, gr := range groups {
		lo, n := p.Owned(g, rank)
		base := p.Groups[g].PartOff
		var segs []segment
		for _, t := range gr.Tensors {
			rel := t.Off - gr.Off
			a, b := max(rel, lo), min(rel+t.Len, lo+n)
			if b <= a {
				continue
			}
			off := base + a - lo
			if k := len(segs) - 1; k >= 0 && segs[k].decay == t.Decay && segs[k].off+segs[k].n == off {
				segs[k].n += b - a
				continue
			}
			segs = append(segs, segment{off: off, n: b - a, decay: t.Decay})
		}
		out[g] = segs
	}
	return out
}
