package data

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"sort"
)

// EvalLoader serves a validation split as Hugging Face's Trainer evaluates
// a dataset: every sample exactly once per pass, in order, never shuffled.
// A sample is a row, for shards with loss-mask companions read one sample
// per row (as training reads them without Pack), or else a window of the
// token stream: window k of a shard has inputs tokens[k·T, k·T+T) and the
// targets one token further, and the shard's last window is shorter, so
// every token of a shard but its first is a target exactly once. A short
// sample is padded: inputs with the pad id, targets IgnoreTarget.
//
// The samples form global batches of B·N, rank r taking the r-th B of each
// (llm.c's order), and the last batch is partial: a rank with fewer than B
// samples left gets fewer rows, and one with none left gets one row whose
// targets are all ignored, so that every rank makes the same number of
// forward passes (ZeRO-3 gathers the parameters in each). Not safe for
// concurrent use.
type EvalLoader struct {
	b, t, rank, world int64
	vocab             int64
	shards            []loaderShard
	rows              *rowLoader // a row split; nil for a token stream
	starts            []int64    // a stream: starts[i] is shard i's first window, starts[len] all windows
	total             int64      // samples in the split
	batches           int64      // global batches in the split
	numBatches        int64      // global batches one pass serves
	done              int64

	file    *os.File
	fileIdx int
	buf     []byte
	toks    []int32
	labels  []bool
	masked  bool
}

// NewEvalLoader builds an eval loader over opts.Shards: opts.B is the
// samples per rank of a batch (Hugging Face's per_device_eval_batch_size).
// maxBatches ≤ 0 serves every batch; a positive maxBatches caps a pass at
// that many global batches, taken evenly spaced over the split (batch i of
// n is the split's batch ⌊i·total/n⌋), so a short evaluation measures the
// whole split rather than its first documents, which sorted inputs put
// together.
func NewEvalLoader(opts LoaderOptions, maxBatches int) (*EvalLoader, error) {
	if opts.Shuffle {
		return nil, fmt.Errorf("eval loader: the validation split is read in order; Shuffle must be false")
	}
	if opts.B < 1 || opts.T < 1 {
		return nil, fmt.Errorf("eval loader: B and T must be ≥ 1, got B=%d T=%d", opts.B, opts.T)
	}
	if opts.WorldSize < 1 || opts.Rank < 0 || opts.Rank >= opts.WorldSize {
		return nil, fmt.Errorf("eval loader: rank %d of world size %d is out of range", opts.Rank, opts.WorldSize)
	}
	if opts.Vocab < 1 {
		return nil, fmt.Errorf("eval loader: vocabulary size %d is out of range; pass the model's vocab_size", opts.Vocab)
	}
	paths, err := ResolveShards(opts.Shards)
	if err != nil {
		return nil, fmt.Errorf("eval loader: %w", err)
	}
	shards, masked, err := openLoaderShards(paths, int64(opts.Vocab))
	if err != nil {
		return nil, fmt.Errorf("eval loader: %w", err)
	}
	e := &EvalLoader{b: int64(opts.B), t: int64(opts.T), rank: int64(opts.Rank), world: int64(opts.WorldSize),
		vocab: int64(opts.Vocab), shards: shards, masked: masked, fileIdx: -1}
	if masked && !opts.Pack {
		for _, s := range shards {
			e.total += s.mask.Header.NumRows
		}
		if e.total > 0 {
			// One row a sample: the row loader of one rank and B = 1 reads
			// row i of the whole list.
			if e.rows, err = newRowLoader(shards, LoaderOptions{B: 1, T: opts.T, WorldSize: 1}); err != nil {
				e.Close()
				return nil, fmt.Errorf("eval loader: %w", err)
			}
		}
	} else {
		e.starts = make([]int64, len(shards)+1)
		for i, s := range shards {
			e.starts[i+1] = e.starts[i] + (max(s.header.NumTokens-1, 0)+e.t-1)/e.t
		}
		e.total = e.starts[len(shards)]
		e.buf = make([]byte, 4*(opts.T+1))
		e.toks = make([]int32, opts.T+1)
		e.labels = make([]bool, opts.T+1)
	}
	if e.total == 0 {
		e.Close()
		what := paths[0]
		if len(paths) > 1 {
			what = fmt.Sprintf("the %d shards %s, ...", len(paths), paths[0])
		}
		return nil, fmt.Errorf("eval loader: %s hold no sample to score (a row, or two tokens of a stream); "+
			"pass validation shards that hold some, or evaluate without validation data", what)
	}
	e.batches = (e.total + e.b*e.world - 1) / (e.b * e.world)
	e.numBatches = e.batches
	if maxBatches > 0 {
		e.numBatches = min(e.batches, int64(maxBatches))
	}
	return e, nil
}

// NumBatches is how many batches one pass yields, the same on every rank.
func (e *EvalLoader) NumBatches() int64 { return e.numBatches }

// Samples is how many samples (rows or windows) the split holds; a pass
// without a cap scores each of them once.
func (e *EvalLoader) Samples() int64 { return e.total }

// Next fills the first n rows (n·T ids) of inputs and targets, each of
// length B·T, with this rank's share of the next batch and returns n, or
// returns io.EOF once NumBatches batches were served. n is B but in the
// last batch; a rank whose share of it is empty gets n = 1, a row of
// ignored targets.
func (e *EvalLoader) Next(inputs, targets []int32) (int, error) {
	if e.done >= e.numBatches {
		return 0, io.EOF
	}
	if int64(len(inputs)) != e.b*e.t || int64(len(targets)) != e.b*e.t {
		panic("data: EvalLoader.Next needs inputs and targets of length B*T")
	}
	g := e.done * e.batches / e.numBatches
	first := g*e.b*e.world + e.rank*e.b
	n := min(max(e.total-first, 0), e.b)
	for i := range n {
		in, tg := inputs[i*e.t:(i+1)*e.t], targets[i*e.t:(i+1)*e.t]
		if err := e.readSample(first+i, in, tg); err != nil {
			return 0, err
		}
	}
	if n == 0 {
		clear(inputs[:e.t])
		for i := range targets[:e.t] {
			targets[i] = IgnoreTarget
		}
		n = 1
	}
	e.done++
	return int(n), nil
}

// readSample fills one sample's T inputs and targets.
func (e *EvalLoader) readSample(idx int64, in, tg []int32) error {
	if e.rows != nil {
		return e.rows.readRow(idx, in, tg)
	}
	si := sort.Search(len(e.shards), func(i int) bool { return e.starts[i+1] > idx })
	s := &e.shards[si]
	start := (idx - e.starts[si]) * e.t
	n := min(e.t+1, s.header.NumTokens-start) // tokens read: the window's inputs and one more
	if err := e.read(si, start, e.toks[:n]); err != nil {
		return err
	}
	labels := e.labels[:n]
	if s.mask != nil {
		if err := s.mask.Labels(labels, start); err != nil {
			return fmt.Errorf("eval loader: %w", err)
		}
	}
	for i := range in {
		in[i], tg[i] = 0, IgnoreTarget
		if int64(i)+1 < n {
			in[i] = e.toks[i]
			if s.mask == nil || labels[i+1] {
				tg[i] = e.toks[i+1]
			}
		}
	}
	return nil
}

// read copies the tokens of shard si from token start into dst.
func (e *EvalLoader) read(si int, start int64, dst []int32) error {
	s := &e.shards[si]
	if e.fileIdx != si {
		if e.file != nil {
			e.file.Close()
			e.file, e.fileIdx = nil, -1
		}
		f, _, err := openShard(s.path)
		if err != nil {
			return fmt.Errorf("eval loader: %w", err)
		}
		e.file, e.fileIdx = f, si
	}
	w := int64(s.header.Format.TokenBytes())
	buf := e.buf[:int64(len(dst))*w]
	if _, err := e.file.ReadAt(buf, ShardHeaderBytes+start*w); err != nil {
		return fmt.Errorf("eval loader: token shard %s: read %d tokens at token %d: %w", s.path, len(dst), start, err)
	}
	// Every id was checked when the loader was built; one out of range now
	// means the file changed since.
	if i, id := firstOutside(buf, w, e.vocab); i >= 0 {
		return fmt.Errorf("eval loader: %w", vocabError(s.path, start+i, w, id, e.vocab, " (the file changed after the loader checked it)"))
	}
	for i := range dst {
		if w == 2 {
			dst[i] = int32(binary.LittleEndian.Uint16(buf[2*i:]))
		} else {
			dst[i] = int32(binary.LittleEndian.Uint32(buf[4*i:]))
		}
	}
	return nil
}

// Masked reports whether the split's shards have loss-mask companions.
func (e *EvalLoader) Masked() bool { return e.masked }

// Reset goes back to the first batch.
func (e *EvalLoader) Reset() { e.done = 0 }

// Close releases the open shard files.
func (e *EvalLoader) Close() error {
	closeMasks(e.shards)
	if e.rows != nil {
		e.rows.close()
	}
	if e.file == nil {
		return nil
	}
	err := e.file.Close()
	e.file, e.fileIdx = nil, -1
	return err
}
