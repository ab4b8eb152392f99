package data

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"sort"
)

// openCompanion opens shard path's loss-mask companion, if it has one,
// and checks that the data set is all masked or all plain: first says
// whether this is the first shard, whose answer *masked records.
func openCompanion(path string, h ShardHeader, vocab int64, first bool, masked *bool) (*MaskFile, error) {
	mp := MaskPath(path)
	_, err := os.Stat(mp)
	has := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("loss-mask companion: %w", err)
	}
	if first {
		*masked = has
	} else if has != *masked {
		return nil, fmt.Errorf("token shard %s %s a loss-mask companion (%s) but the shards before it %s; "+
			"a data set is all rows with masks or all plain text, so pass shards of one kind",
			path, map[bool]string{true: "has", false: "has no"}[has], mp, map[bool]string{true: "do not", false: "do"}[has])
	}
	if !has {
		return nil, nil
	}
	m, err := OpenMask(mp, h.NumTokens)
	if err != nil {
		return nil, err
	}
	if int64(m.Header.PadID) >= vocab {
		m.Close()
		return nil, maskErr(mp, "pad id %d is outside the model's vocabulary [0, %d)", m.Header.PadID, vocab)
	}
	return m, nil
}

func closeMasks(shards []loaderShard) {
	for _, s := range shards {
		if s.mask != nil {
			s.mask.Close()
		}
	}
}

// rowLoader serves one row per sample: the row's first T+1 tokens give
// inputs ids[:T] and targets ids[1:T+1], targets without a label are
// IgnoreTarget, and a shorter row is padded (inputs with the companion's
// pad id, targets ignored). All shards' rows form one list in lexical
// shard order; a group is the B·N rows of one micro-step on all ranks, and
// rank r takes rows r·B … r·B+B−1 of it. Without shuffling rows are taken
// in file order; with it, every epoch permutes the whole list (PCG seeded
// by Seed+epoch), the same on every rank. Rows past the last whole group
// of an epoch are not served that epoch.
type rowLoader struct {
	shards    []loaderShard
	base      []int64 // base[i]: global index of shard i's first row; base[len] = total rows
	files     []*os.File
	B, T      int
	rank, nb  int64 // this rank, and B·N rows per group
	groups    int64
	shuffle   bool
	seed      uint64
	perm      []int32
	permEpoch int64
	buf       []byte
	labels    []bool
	toks      []int32
}

func newRowLoader(shards []loaderShard, o LoaderOptions) (*rowLoader, error) {
	r := &rowLoader{shards: shards, B: o.B, T: o.T, rank: int64(o.Rank), nb: int64(o.B) * int64(o.WorldSize),
		shuffle: o.Shuffle, seed: o.Seed, permEpoch: -1, files: make([]*os.File, len(shards))}
	r.base = make([]int64, len(shards)+1)
	for i, s := range shards {
		r.base[i+1] = r.base[i] + s.mask.Header.NumRows
	}
	total := r.base[len(shards)]
	r.groups = total / r.nb
	if r.groups == 0 {
		return nil, fmt.Errorf("the shards hold %d rows, fewer than one micro-step's B·N = %d·%d on all ranks; "+
			"lower the micro-batch size (train_micro_batch_size_per_gpu) or the number of ranks, or add rows", total, o.B, o.WorldSize)
	}
	if total > 1<<31-1 {
		return nil, fmt.Errorf("%d rows are more than a row loader indexes", total)
	}
	r.buf = make([]byte, 4*(o.T+1))
	r.labels = make([]bool, o.T+1)
	r.toks = make([]int32, o.T+1)
	return r, nil
}

// next fills one micro-batch at st and advances st.
func (r *rowLoader) next(st *LoaderState, inputs, targets []int32) error {
	if err := r.readGroup(st.Epoch, st.Group, inputs, targets); err != nil {
		return err
	}
	st.Group++
	if st.Group == r.groups {
		st.Group = 0
		st.Epoch++
	}
	st.GroupRows = r.nb
	return nil
}

// readGroup fills this rank's B rows of group g of the epoch.
func (r *rowLoader) readGroup(epoch, g int64, inputs, targets []int32) error {
	for b := range r.B {
		idx := g*r.nb + r.rank*int64(r.B) + int64(b)
		if r.shuffle {
			r.ensurePerm(epoch)
			idx = int64(r.perm[idx])
		}
		lo, hi := b*r.T, (b+1)*r.T
		if err := r.readRow(idx, inputs[lo:hi], targets[lo:hi]); err != nil {
			return err
		}
	}
	return nil
}

func (r *rowLoader) ensurePerm(epoch int64) {
	if r.permEpoch == epoch {
		return
	}
	n := r.base[len(r.shards)]
	if r.perm == nil {
		r.perm = make([]int32, n)
	}
	for i := range r.perm {
		r.perm[i] = int32(i)
	}
	rng := rand.New(rand.NewPCG(r.seed+uint64(epoch), 0x726f7773))
	rng.Shuffle(int(n), func(i, j int) { r.perm[i], r.perm[j] = r.perm[j], r.perm[i] })
	r.permEpoch = epoch
}

// readRow fills one sample (T inputs and targets) from global row idx.
func (r *rowLoader) readRow(idx int64, in, tg []int32) error {
	si := sort.Search(len(r.shards), func(i int) bool { return r.base[i+1] > idx }) // the shard holding idx
	s := &r.shards[si]
	local := idx - r.base[si]
	start, end := int64(s.mask.Starts[local]), int64(s.mask.Starts[local+1])
	n := min(end-start, int64(r.T)+1)
	if r.files[si] == nil {
		f, _, err := openShard(s.path)
		if err != nil {
			return fmt.Errorf("data loader: %w", err)
		}
		r.files[si] = f
	}
	w := int64(s.header.Format.TokenBytes())
	buf := r.buf[:n*w]
	if _, err := r.files[si].ReadAt(buf, ShardHeaderBytes+start*w); err != nil {
		return fmt.Errorf("data loader: token shard %s: read row %d (%d tokens at token %d): %w", s.path, local, n, start, err)
	}
	toks := r.toks[:n]
	for i := range toks {
		if w == 2 {
			toks[i] = int32(binary.LittleEndian.Uint16(buf[2*i:]))
		} else {
			toks[i] = int32(binary.LittleEndian.Uint32(buf[4*i:]))
		}
	}
	labels := r.labels[:n]
	if err := s.mask.Labels(labels, start); err != nil {
		return fmt.Errorf("data loader: %w", err)
	}
	pad := s.mask.Header.PadID
	for t := range in {
		in[t], tg[t] = pad, IgnoreTarget
		if int64(t) < n {
			in[t] = toks[t]
		}
		if int64(t)+1 < n && labels[t+1] {
			tg[t] = toks[t+1]
		}
	}
	return nil
}

// restore moves to a saved row position; a state saved with another B·N
// is carried over in rows (rounded down to a whole group).
func (r *rowLoader) restore(cur *LoaderState, s LoaderState) error {
	if s.GroupTokens != 0 || s.GroupRows == 0 {
		return fmt.Errorf("data loader: the state was saved by a loader that read a token stream; this one serves one row per sample (pass --pack to read the rows as a stream)")
	}
	if s.GroupRows != r.nb {
		s.Group = s.Group * s.GroupRows / r.nb
		s.GroupRows = r.nb
	}
	if s.Epoch < 0 || s.Group < 0 || s.Group >= r.groups {
		return fmt.Errorf("data loader: state epoch %d group %d is out of range (%d groups of %d rows)", s.Epoch, s.Group, r.groups, r.nb)
	}
	*cur = LoaderState{Epoch: s.Epoch, Group: s.Group, GroupRows: r.nb}
	return nil
}

func (r *rowLoader) close() {
	for i, f := range r.files {
		if f != nil {
			f.Close()
			r.files[i] = nil
		}
	}
}
