package zero

// GroupPart is where one parameter group sits once it is partitioned over
// World ranks: padded to Padded = Chunk·World elements and cut into World
// equal chunks, rank r owning group-relative elements [r·Chunk, (r+1)·Chunk).
// Elements Len..Padded-1 are zero padding that exists only in padded and
// partition buffers, never in the model's view of the group.
type GroupPart struct {
	Len       int // n_g: the group's real elements
	Chunk     int // c_g = ceil(n_g / World): what each rank owns
	Padded    int // n_g' = c_g·World
	PaddedOff int // the group's first element in a padded flat buffer (Σ Padded of earlier groups)
	PartOff   int // the group's chunk's first element in every rank's partition (Σ Chunk of earlier groups)
}

// Plan partitions a list of groups over World ranks. Every rank's partition
// is the concatenation of its chunks in group order, so all partitions have
// the same length PartLen, and a padded flat buffer (each group at
// PaddedOff, Padded long) has length PaddedLen = World·PartLen. A Plan is an
// immutable value.
type Plan struct {
	World     int
	Groups    []GroupPart
	PartLen   int
	PaddedLen int
}

// NewPlan partitions groups of the given sizes (elements, ≥ 0) over world
// ranks (≥ 1). A bad size or world is a bug in the caller and panics.
func NewPlan(sizes []int, world int) Plan {
	if world < 1 {
		panic("zero: plan for a world of fewer than 1 rank")
	}
	p := Plan{World: world, Groups: make([]GroupPart, len(sizes))}
	for g, n := range sizes {
		if n < 0 {
			panic("zero: negative group size")
		}
		c := (n + world - 1) / world
		p.Groups[g] = GroupPart{Len: n, Chunk: c, Padded: c * world, PaddedOff: p.PaddedLen, PartOff: p.PartLen}
		p.PartLen += c
		p.PaddedLen += c * world
	}
	return p
}

// Owned is the range of group g's real elements that rank owns, relative to
// the group's first element: [lo, lo+n). n is 0 when the rank's chunk lies
// wholly in the padding (a group smaller than the world), and less than
// Chunk for the rank whose chunk reaches the padding.
func (p Plan) Owned(g, rank int) (lo, n int) {
	if rank < 0 || rank >= p.World {
		panic("zero: rank out of range")
	}
	gp := p.Groups[g]
	lo = rank * gp.Chunk
	hi := min(lo+gp.Chunk, gp.Len)
	return lo, max(0, hi-lo)
}

// ChunkRange is one group's piece of a rank's partition: real elements
// [Off, Off+Len) of group Group (relative to the group's first element) sit
// at PartOff in the rank's partition buffers (master, moments, partition
// gradients). Len excludes padding and may be 0.
type ChunkRange struct {
	Group   int
	Off     int
	Len     int
	PartOff int
}

// Chunks lists what rank owns, one entry per group in group order.
func (p Plan) Chunks(rank int) []ChunkRange {
	out := make([]ChunkRange, len(p.Groups))
	for g, gp := range p.Groups {
		lo, n := p.Owned(g, rank)
		out[g] = ChunkRange{Group: g, Off: lo, Len: n, PartOff: gp.PartOff}
	}
	return out
}
