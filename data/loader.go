package data

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
)

// LoaderOptions configure a Loader.
type LoaderOptions struct {
	// Shards are shard files or globs; all matches are read in lexical order.
	Shards []string
	// B is the micro-batch size and T the sequence length: one Next yields
	// B·T inputs and B·T targets.
	B, T int
	// Rank r of WorldSize N: rank r reads the r-th chunk of every group of N
	// chunks, so the ranks read disjoint tokens.
	Rank, WorldSize int
	// Shuffle permutes the shard order and the group order inside each shard,
	// anew every epoch, from math/rand/v2 seeded with Seed+epoch. Every rank
	// computes the same permutations, so ranks stay disjoint.
	Shuffle bool
	Seed    uint64
	// Vocab is the model's vocabulary size V: every token id of every shard
	// must be below it. NewLoader checks all of them before it returns (see
	// checkShardVocab), so a shard made with another tokenizer fails before
	// the first step rather than at the batch that holds the bad id.
	Vocab int
	// Pack reads shards with loss-mask companions (rows of instruction or
	// chat data) as one token stream, like plain shards, with the
	// unlabelled targets ignored: full B·T samples whose attention crosses
	// row boundaries. Without Pack such shards give one sample per row
	// (see rowLoader). Plain shards are always a stream.
	Pack bool
}

// LoaderState is the position of the next micro-batch, for checkpoints.
// Shard and Group index the (possibly shuffled) order of the epoch.
type LoaderState struct {
	Epoch int64 `json:"epoch"`
	Shard int   `json:"shard"`
	Group int64 `json:"group"`
	// GroupTokens is B·T·N of the loader that saved the state: a position is
	// only meaningful for the same geometry.
	GroupTokens int64 `json:"group_tokens"`
	// GroupRows is B·N of a loader that serves one row per sample (0 for
	// a token stream); Group then counts groups of GroupRows rows.
	GroupRows int64 `json:"group_rows,omitempty"`
}

// shardSize is a shard's path and token count.
type shardSize struct {
	path   string
	tokens int64
}

type loaderShard struct {
	path   string
	header ShardHeader
	groups int64     // (ntok−1) / (B·T·N), as llm.c counts samples
	mask   *MaskFile // the loss-mask companion; nil for plain shards
}

// Loader serves one rank's micro-batches in llm.c's order: shard after shard,
// group after group, wrapping to the first shard after the last (Epoch+1).
// Group g of a shard starts at token g·B·T·N; rank r reads the B·T+1 tokens
// at g·B·T·N + r·B·T. Shards too small for one group are skipped (see
// SkippedShards). Only the B·T+1 tokens of a batch are read from disk, so
// memory stays small whatever the shard size. Not safe for concurrent use.
type Loader struct {
	bt, rank, world int64
	vocab           int64
	shuffle         bool
	seed            uint64
	shards          []loaderShard
	skipped         []string
	sizes           []shardSize // every shard, skipped ones too, in lexical order

	st         LoaderState
	shardOrder []int   // shard indices in this epoch's order
	groupOrder []int32 // group indices of the current shard when shuffling
	groupFor   [2]int64
	file       *os.File
	fileIdx    int
	buf        []byte

	masked bool       // the shards have loss-mask companions
	labels []bool     // scratch: label flags of the tokens read
	rows   *rowLoader // one sample per row; nil for a token stream
}

// NewLoader validates every shard (header, size, and every token id against
// opts.Vocab) and builds a loader positioned at the first batch of epoch 0.
func NewLoader(opts LoaderOptions) (*Loader, error) {
	if opts.B < 1 || opts.T < 1 {
		return nil, fmt.Errorf("data loader: B and T must be ≥ 1, got B=%d T=%d", opts.B, opts.T)
	}
	if opts.WorldSize < 1 || opts.Rank < 0 || opts.Rank >= opts.WorldSize {
		return nil, fmt.Errorf("data loader: rank %d of world size %d is out of range", opts.Rank, opts.WorldSize)
	}
	if opts.Vocab < 1 || int64(opts.Vocab) > math.MaxInt32 {
		return nil, fmt.Errorf("data loader: vocabulary size %d is out of range [1, %d]; pass the model's vocab_size", opts.Vocab, math.MaxInt32)
	}
	bt := int64(opts.B) * int64(opts.T)
	if bt > math.MaxInt32 || bt*int64(opts.WorldSize) > math.MaxInt32 {
		return nil, fmt.Errorf("data loader: B·T·N = %d·%d·%d is larger than any shard can hold", opts.B, opts.T, opts.WorldSize)
	}
	paths, err := ResolveShards(opts.Shards)
	if err != nil {
		return nil, fmt.Errorf("data loader: %w", err)
	}
	l := &Loader{
		bt: bt, rank: int64(opts.Rank), world: int64(opts.WorldSize), vocab: int64(opts.Vocab),
		shuffle: opts.Shuffle, seed: opts.Seed,
		fileIdx:  -1,
		groupFor: [2]int64{-1, -1},
	}
	need := l.GroupTokens() + 1
	var largest loaderShard
	all, masked, err := openLoaderShards(paths, l.vocab)
	if err != nil {
		return nil, fmt.Errorf("data loader: %w", err)
	}
	l.masked = masked
	built := false
	defer func() {
		if !built {
			closeMasks(all)
		}
	}()
	for i := range all {
		all[i].groups = (all[i].header.NumTokens - 1) / l.GroupTokens()
		l.sizes = append(l.sizes, shardSize{all[i].path, all[i].header.NumTokens})
	}
	if l.masked && !opts.Pack {
		if l.rows, err = newRowLoader(all, opts); err != nil {
			return nil, fmt.Errorf("data loader: %w", err)
		}
		l.shards, built = all, true
		l.st.GroupRows = l.rows.nb
		return l, nil
	}
	for _, s := range all {
		if s.header.NumTokens > largest.header.NumTokens {
			largest = s
		}
		if s.groups == 0 {
			l.skipped = append(l.skipped, s.path)
			if s.mask != nil {
				s.mask.Close()
			}
			continue
		}
		l.shards = append(l.shards, s)
	}
	if len(l.shards) == 0 {
		return nil, fmt.Errorf("data loader: no token shard holds one batch group for B=%d T=%d on %d ranks: "+
			"a group needs N·B·T+1 = %d tokens, the largest shard (%s) has %d; "+
			"lower the micro-batch size (train_micro_batch_size_per_gpu), the sequence length or the number of ranks, or add tokens",
			opts.B, opts.T, opts.WorldSize, need, largest.path, largest.header.NumTokens)
	}
	built = true
	maxW := 0
	for _, s := range l.shards {
		maxW = max(maxW, s.header.Format.TokenBytes())
	}
	l.buf = make([]byte, (bt+1)*int64(maxW))
	if l.masked {
		l.labels = make([]bool, bt+1)
	}
	l.st.GroupTokens = l.GroupTokens()
	l.shardOrder = l.epochShardOrder(0)
	return l, nil
}

// GroupTokens is B·T·N, the tokens all ranks consume together per Next;
// 0 for a loader that serves one row per sample (its position is in rows).
func (l *Loader) GroupTokens() int64 {
	if l.rows != nil {
		return 0
	}
	return l.bt * l.world
}

// Shards lists the shards the loader reads, in lexical order.
func (l *Loader) Shards() []string {
	out := make([]string, len(l.shards))
	for i, s := range l.shards {
		out[i] = s.path
	}
	return out
}

// SkippedShards lists shards with fewer than N·B·T+1 tokens, which hold no
// complete group and are never read.
func (l *Loader) SkippedShards() []string { return append([]string(nil), l.skipped...) }

// Masked reports whether the shards have loss-mask companions, so that
// some targets are IgnoreTarget.
func (l *Loader) Masked() bool { return l.masked }

// BatchesPerEpoch is the number of Next calls in one pass over the shards.
func (l *Loader) BatchesPerEpoch() int64 {
	if l.rows != nil {
		return l.rows.groups
	}
	var n int64
	for _, s := range l.shards {
		n += s.groups
	}
	return n
}

// Next fills inputs and targets (each of length B·T, row-major (B, T)) with
// the next micro-batch and advances. It does not allocate.
func (l *Loader) Next(inputs, targets []int32) error {
	if int64(len(inputs)) != l.bt || int64(len(targets)) != l.bt {
		panic("data: Loader.Next needs inputs and targets of length B*T")
	}
	if l.rows != nil {
		return l.rows.next(&l.st, inputs, targets)
	}
	si := l.shardOrder[l.st.Shard]
	s := &l.shards[si]
	g := l.st.Group
	if l.shuffle {
		l.ensureGroupOrder(si)
		g = int64(l.groupOrder[g])
	}
	if err := l.read(si, g, inputs, targets); err != nil {
		return err
	}
	l.st.Group++
	if l.st.Group == s.groups {
		l.st.Group = 0
		l.st.Shard++
		if l.st.Shard == len(l.shards) {
			l.st.Shard = 0
			l.st.Epoch++
			l.shardOrder = l.epochShardOrder(l.st.Epoch)
		}
	}
	return nil
}

// read copies the B·T+1 tokens of this rank's chunk of group g of shard si.
func (l *Loader) read(si int, g int64, inputs, targets []int32) error {
	s := &l.shards[si]
	if l.fileIdx != si {
		if l.file != nil {
			l.file.Close()
			l.file = nil
			l.fileIdx = -1
		}
		f, _, err := openShard(s.path)
		if err != nil {
			return fmt.Errorf("data loader: %w", err)
		}
		l.file, l.fileIdx = f, si
	}
	w := int64(s.header.Format.TokenBytes())
	pos := g*l.GroupTokens() + l.rank*l.bt
	buf := l.buf[:(l.bt+1)*w]
	if _, err := l.file.ReadAt(buf, ShardHeaderBytes+pos*w); err != nil {
		return fmt.Errorf("data loader: token shard %s: read %d tokens at token %d: %w", s.path, l.bt+1, pos, err)
	}
	// Every id was checked when the loader was built; one out of range now
	// means the file changed since, or its header's max-token record lied.
	if i, id := firstOutside(buf, w, l.vocab); i >= 0 {
		return fmt.Errorf("data loader: %w", vocabError(s.path, pos+i, w, id, l.vocab,
			" (the file changed after the loader checked it, or its header misstates its largest id)"))
	}
	if w == 2 {
		prev := int32(binary.LittleEndian.Uint16(buf))
		for i := range inputs {
			next := int32(binary.LittleEndian.Uint16(buf[2*(i+1):]))
			inputs[i], targets[i] = prev, next
			prev = next
		}
	} else {
		prev := int32(binary.LittleEndian.Uint32(buf))
		for i := range inputs {
			next := int32(binary.LittleEndian.Uint32(buf[4*(i+1):]))
			inputs[i], targets[i] = prev, next
			prev = next
		}
	}
	if s.mask == nil {
		return nil
	}
	if err := s.mask.Labels(l.labels, pos); err != nil {
		return fmt.Errorf("data loader: %w", err)
	}
	for i, lab := range l.labels[1:] {
		if !lab {
			targets[i] = IgnoreTarget
		}
	}
	return nil
}

// epochShardOrder is the identity, or a permutation seeded by Seed+epoch.
func (l *Loader) epochShardOrder(epoch int64) []int {
	order := make([]int, len(l.shards))
	for i := range order {
		order[i] = i
	}
	if l.shuffle {
		r := rand.New(rand.NewPCG(l.seed+uint64(epoch), 0))
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	return order
}

// ensureGroupOrder permutes the groups of shard si for the current epoch. The
// second PCG word is the shard's index so each shard gets its own stream.
func (l *Loader) ensureGroupOrder(si int) {
	if l.groupFor == [2]int64{l.st.Epoch, int64(si)} {
		return
	}
	n := l.shards[si].groups
	if int64(cap(l.groupOrder)) < n {
		l.groupOrder = make([]int32, n)
	}
	l.groupOrder = l.groupOrder[:n]
	for i := range l.groupOrder {
		l.groupOrder[i] = int32(i)
	}
	r := rand.New(rand.NewPCG(l.seed+uint64(l.st.Epoch), uint64(si)+1))
	r.Shuffle(int(n), func(i, j int) { l.groupOrder[i], l.groupOrder[j] = l.groupOrder[j], l.groupOrder[i] })
	l.groupFor = [2]int64{l.st.Epoch, int64(si)}
}

// Save returns the position of the next micro-batch.
func (l *Loader) Save() LoaderState { return l.st }

// Restore moves to a saved position. A state saved with a different B·T·N is
// refused, because its group indices would point at other tokens. A row
// loader carries a position saved with another B·N over in rows.
func (l *Loader) Restore(s LoaderState) error {
	if l.rows != nil {
		return l.rows.restore(&l.st, s)
	}
	if s.GroupRows != 0 {
		return fmt.Errorf("data loader: the state was saved by a loader that served one row per sample; this one reads a token stream (--pack, or shards without loss-mask companions)")
	}
	if s.GroupTokens != 0 && s.GroupTokens != l.GroupTokens() {
		return fmt.Errorf("data loader: state was saved with B·T·N = %d tokens per group, this loader uses %d; the data position cannot be carried over",
			s.GroupTokens, l.GroupTokens())
	}
	if s.Epoch < 0 || s.Shard < 0 || s.Shard >= len(l.shards) {
		return fmt.Errorf("data loader: state epoch %d shard %d is out of range (%d usable shards)", s.Epoch, s.Shard, len(l.shards))
	}
	order := l.epochShardOrder(s.Epoch)
	sh := l.shards[order[s.Shard]]
	if s.Group < 0 || s.Group >= sh.groups {
		return fmt.Errorf("data loader: state group %d is out of range for shard %s (%d groups)", s.Group, sh.path, sh.groups)
	}
	l.st = s
	l.st.GroupTokens = l.GroupTokens()
	l.shardOrder = order
	return nil
}

// Close releases the open shard files. The loader must not be used after.
func (l *Loader) Close() error {
	closeMasks(l.shards)
	if l.rows != nil {
		l.rows.close()
	}
	if l.file == nil {
		return nil
	}
	err := l.file.Close()
	l.file, l.fileIdx = nil, -1
	return err
}

// openLoaderShards validates every shard at paths (header, size, token ids
// below vocab) and opens its loss-mask companion, if any: masked reports
// whether they have companions (all or none may). On error nothing stays
// open. The caller fills in groups.
func openLoaderShards(paths []string, vocab int64) (all []loaderShard, masked bool, err error) {
	defer func() {
		if err != nil {
			closeMasks(all)
		}
	}()
	for i, p := range paths {
		h, err := openAndCheckShard(p, vocab)
		if err != nil {
			return all, false, err
		}
		s := loaderShard{path: p, header: h}
		if s.mask, err = openCompanion(p, h, vocab, i == 0, &masked); err != nil {
			return all, false, err
		}
		all = append(all, s)
	}
	return all, masked, nil
}

// openAndCheckShard reads a shard's header and checks its token ids against
// vocab, on one open file.
func openAndCheckShard(path string, vocab int64) (ShardHeader, error) {
	f, st, err := openShard(path)
	if err != nil {
		return ShardHeader{}, err
	}
	defer f.Close()
	h, err := readShardHeaderFile(path, f, st)
	if err != nil {
		return ShardHeader{}, err
	}
	if err := checkShardVocab(path, f, h, vocab); err != nil {
		return ShardHeader{}, err
	}
	return h, nil
}
