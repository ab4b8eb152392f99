package zero

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// Hand-computed plans: n_g' = ceil(n_g/N)·N, c_g = n_g'/N, offsets are
// prefix sums, rank r owns [r·c_g, min((r+1)·c_g, n_g)).
func TestPlanTables(t *testing.T) {
	type owned struct{ lo, n int }
	cases := []struct {
		name      string
		sizes     []int
		world     int
		groups    []GroupPart
		partLen   int
		paddedLen int
		owned     [][]owned // [group][rank]
	}{
		{
			name: "one rank keeps everything unpadded", sizes: []int{5, 3}, world: 1,
			groups:  []GroupPart{{Len: 5, Chunk: 5, Padded: 5, PaddedOff: 0, PartOff: 0}, {Len: 3, Chunk: 3, Padded: 3, PaddedOff: 5, PartOff: 5}},
			partLen: 8, paddedLen: 8,
			owned: [][]owned{{{0, 5}}, {{0, 3}}},
		},
		{
			name: "uneven sizes over four ranks", sizes: []int{10, 1, 8}, world: 4,
			groups: []GroupPart{
				{Len: 10, Chunk: 3, Padded: 12, PaddedOff: 0, PartOff: 0},
				{Len: 1, Chunk: 1, Padded: 4, PaddedOff: 12, PartOff: 3},
				{Len: 8, Chunk: 2, Padded: 8, PaddedOff: 16, PartOff: 4},
			},
			partLen: 6, paddedLen: 24,
			owned: [][]owned{
				{{0, 3}, {3, 3}, {6, 3}, {9, 1}},
				{{0, 1}, {1, 0}, {2, 0}, {3, 0}},
				{{0, 2}, {2, 2}, {4, 2}, {6, 2}},
			},
		},
		{
			name: "a single element over three ranks", sizes: []int{1}, world: 3,
			groups:  []GroupPart{{Len: 1, Chunk: 1, Padded: 3}},
			partLen: 1, paddedLen: 3,
			owned: [][]owned{{{0, 1}, {1, 0}, {2, 0}}},
		},
		{
			name: "an empty group", sizes: []int{0, 7}, world: 2,
			groups:  []GroupPart{{Len: 0, Chunk: 0, Padded: 0}, {Len: 7, Chunk: 4, Padded: 8, PaddedOff: 0, PartOff: 0}},
			partLen: 4, paddedLen: 8,
			owned: [][]owned{{{0, 0}, {0, 0}}, {{0, 4}, {4, 3}}},
		},
		{
			name: "groups smaller than the world and one past a multiple", sizes: []int{3, 16, 17}, world: 8,
			groups: []GroupPart{
				{Len: 3, Chunk: 1, Padded: 8, PaddedOff: 0, PartOff: 0},
				{Len: 16, Chunk: 2, Padded: 16, PaddedOff: 8, PartOff: 1},
				{Len: 17, Chunk: 3, Padded: 24, PaddedOff: 24, PartOff: 3},
			},
			partLen: 6, paddedLen: 48,
			owned: [][]owned{
				{{0, 1}, {1, 1}, {2, 1}, {3, 0}, {4, 0}, {5, 0}, {6, 0}, {7, 0}},
				{{0, 2}, {2, 2}, {4, 2}, {6, 2}, {8, 2}, {10, 2}, {12, 2}, {14, 2}},
				{{0, 3}, {3, 3}, {6, 3}, {9, 3}, {12, 3}, {15, 2}, {18, 0}, {21, 0}},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPlan(tc.sizes, tc.world)
			if p.World != tc.world || p.PartLen != tc.partLen || p.PaddedLen != tc.paddedLen {
				t.Fatalf("plan world %d part %d padded %d, want %d %d %d", p.World, p.PartLen, p.PaddedLen, tc.world, tc.partLen, tc.paddedLen)
			}
			if !reflect.DeepEqual(p.Groups, tc.groups) {
				t.Fatalf("groups %+v\nwant   %+v", p.Groups, tc.groups)
			}
			for g := range tc.sizes {
				for r := range tc.world {
					lo, n := p.Owned(g, r)
					if (owned{lo, n}) != tc.owned[g][r] {
						t.Errorf("group %d rank %d owns [%d, +%d), want %+v", g, r, lo, n, tc.owned[g][r])
					}
				}
			}
			for r := range tc.world {
				for g, cr := range p.Chunks(r) {
					want := ChunkRange{Group: g, Off: tc.owned[g][r].lo, Len: tc.owned[g][r].n, PartOff: tc.groups[g].PartOff}
					if cr != want {
						t.Errorf("rank %d chunk %+v, want %+v", r, cr, want)
					}
				}
			}
		})
	}
}

// For many random size lists and worlds, the plan has the properties the
// engine relies on, checked element by element.
func TestPlanProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for trial := range 300 {
		world := 1 + rng.IntN(9)
		sizes := make([]int, 1+rng.IntN(40))
		for i := range sizes {
			switch rng.IntN(4) {
			case 0:
				sizes[i] = rng.IntN(3) // 0, 1, 2: smaller than most worlds
			case 1:
				sizes[i] = world * (1 + rng.IntN(5)) // divisible
			default:
				sizes[i] = rng.IntN(500)
			}
		}
		p := NewPlan(sizes, world)
		part, padded := 0, 0
		for g, n := range sizes {
			gp := p.Groups[g]
			// Equal chunks, minimal padding: c·N ≥ n > (c−1)·N.
			if gp.Len != n || gp.Padded != gp.Chunk*world || gp.Padded < n || (gp.Chunk > 0 && (gp.Chunk-1)*world >= n) || (n == 0 && gp.Chunk != 0) {
				t.Fatalf("trial %d group %d (n %d, N %d): %+v", trial, g, n, world, gp)
			}
			if gp.PartOff != part || gp.PaddedOff != padded {
				t.Fatalf("trial %d group %d offsets %+v, want part %d padded %d", trial, g, gp, part, padded)
			}
			part += gp.Chunk
			padded += gp.Padded
			// Every real element has exactly one owner, ranks in order, each
			// inside its own chunk.
			owner := make([]int, n)
			for i := range owner {
				owner[i] = -1
			}
			next := 0
			for r := range world {
				lo, k := p.Owned(g, r)
				if k < 0 || k > gp.Chunk || (k > 0 && (lo != r*gp.Chunk || lo != next)) {
					t.Fatalf("trial %d group %d rank %d owns [%d, +%d) with chunk %d", trial, g, r, lo, k, gp.Chunk)
				}
				for i := lo; i < lo+k; i++ {
					if owner[i] != -1 {
						t.Fatalf("trial %d group %d element %d owned twice", trial, g, i)
					}
					owner[i] = r
				}
				next += k
			}
			if next != n {
				t.Fatalf("trial %d group %d: ranks own %d of %d elements", trial, g, next, n)
			}
		}
		if p.PartLen != part || p.PaddedLen != padded || p.PaddedLen != world*p.PartLen {
			t.Fatalf("trial %d: PartLen %d PaddedLen %d, want %d %d", trial, p.PartLen, p.PaddedLen, part, padded)
		}
	}
}

func TestPlanRejectsBugs(t *testing.T) {
	for name, f := range map[string]func(){
		"world 0":        func() { NewPlan([]int{4}, 0) },
		"negative size":  func() { NewPlan([]int{4, -1}, 2) },
		"rank too large": func() { NewPlan([]int{4}, 2).Owned(0, 2) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			f()
		})
	}
}

// Segments are what AdamW runs on: for a hand-laid-out example, and for
// random layouts by mapping every segment element back to its tensor.
func TestSegments(t *testing.T) {
	// Group 0: a (6, decay) b (2) c (4, decay); group 1: d (3) e (2).
	groups := []Group{
		{Off: 0, Len: 12, Tensors: []Tensor{{0, 6, true}, {6, 2, false}, {8, 4, true}}},
		{Off: 12, Len: 5, Tensors: []Tensor{{12, 3, false}, {15, 2, false}}},
	}
	if total, err := checkGroups(groups); err != nil || total != 17 {
		t.Fatalf("checkGroups: %d %v", total, err)
	}
	// World 3: group 0 chunks of 4 ([0,4) [4,8) [8,12)), group 1 chunks of
	// 2 ([0,2) [2,4) [4,5)+pad), partition offsets 0 and 4.
	p := NewPlan([]int{12, 5}, 3)
	want := [][][]segment{
		{{{0, 4, true}}, {{4, 2, false}}},                // rank 0: a[0:4]; d[0:2]
		{{{0, 2, true}, {2, 2, false}}, {{4, 2, false}}}, // rank 1: a[4:6], b; d[2] and e[0] merged
		{{{0, 4, true}}, {{4, 1, false}}},                // rank 2: c; e[1] (then padding)
	}
	for r := range 3 {
		got := segments(groups, p, r)
		if !reflect.DeepEqual(got, want[r]) {
			t.Errorf("rank %d segments %+v, want %+v", r, got, want[r])
		}
	}
	// World 1 over the unpadded layout: every tensor, merged runs.
	got := segments(groups, NewPlan([]int{12, 5}, 1), 0)
	if w := [][]segment{{{0, 6, true}, {6, 2, false}, {8, 4, true}}, {{12, 5, false}}}; !reflect.DeepEqual(got, w) {
		t.Errorf("world 1 segments %+v, want %+v", got, w)
	}

	rng := rand.New(rand.NewPCG(9, 9))
	for trial := range 200 {
		var gs []Group
		off := 0
		for range 1 + rng.IntN(6) {
			g := Group{Off: off}
			for range rng.IntN(5) {
				n := rng.IntN(7)
				g.Tensors = append(g.Tensors, Tensor{Off: off, Len: n, Decay: rng.IntN(2) == 0})
				off += n
			}
			g.Len = off - g.Off
			gs = append(gs, g)
		}
		sizes := make([]int, len(gs))
		for i, g := range gs {
			sizes[i] = g.Len
		}
		world := 1 + rng.IntN(5)
		plan := NewPlan(sizes, world)
		covered := make([]int, off)
		for r := range world {
			for g, segs := range segments(gs, plan, r) {
				gp := plan.Groups[g]
				lo, n := plan.Owned(g, r)
				for _, s := range segs {
					if s.n <= 0 || s.off < gp.PartOff || s.off+s.n > gp.PartOff+n {
						t.Fatalf("trial %d rank %d group %d: segment %+v outside the owned %d elements at %d", trial, r, g, s, n, gp.PartOff)
					}
					for i := s.off; i < s.off+s.n; i++ {
						flat := gs[g].Off + lo + (i - gp.PartOff)
						for _, tt := range gs[g].Tensors {
							if flat >= tt.Off && flat < tt.Off+tt.Len && tt.Decay != s.decay {
								t.Fatalf("trial %d: element %d has decay %v in a %v segment", trial, flat, tt.Decay, s.decay)
							}
						}
						covered[flat]++
					}
				}
			}
		}
		for i, c := range covered {
			if c != 1 {
				t.Fatalf("trial %d: element %d updated %d times", trial, i, c)
			}
		}
	}
}

func TestCheckGroupsRejectsGapsAndOverlaps(t *testing.T) {
	cases := map[string][]Group{
		"no groups":          nil,
		"gap between groups": {{Off: 0, Len: 2, Tensors: []Tensor{{0, 2, true}}}, {Off: 3, Len: 1, Tensors: []Tensor{{3, 1, true}}}},
		"not from zero":      {{Off: 1, Len: 2, Tensors: []Tensor{{1, 2, true}}}},
		"tensor gap":         {{Off: 0, Len: 4, Tensors: []Tensor{{0, 1, true}, {2, 2, true}}}},
		"tensors short":      {{Off: 0, Len: 4, Tensors: []Tensor{{0, 3, true}}}},
	}
	for name, gs := range cases {
		if _, err := checkGroups(gs); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
