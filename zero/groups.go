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
// groups given to New tile the whole layout in order (the trainer converts
// model.Layout's groups: embeddings, blocks, final LayerNorm).
type Group struct {
	Off, Len int
	Tensors  []Tensor
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
