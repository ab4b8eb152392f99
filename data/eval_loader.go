package data

import (
	"fmt"
	"io"
)

// EvalLoader reads a fixed number of micro-batches of the validation split,
// with the same per-rank chunks as Loader and never shuffled. When fewer
// batches are asked for than the split holds, they are taken evenly spaced
// across it (batch i of n is the split's batch ⌊i·total/n⌋), so a short
// evaluation measures the whole split rather than its first documents —
// sorted inputs put similar files together. After NumBatches batches Next
// returns io.EOF until Reset. Not safe for concurrent use.
type EvalLoader struct {
	l          *Loader
	numBatches int64
	total      int64 // batches in the split
	done       int64
}

// NewEvalLoader builds an eval loader over opts.Shards. maxBatches ≤ 0 means
// the whole split (llm.c's -m -1); a larger request than the split holds is
// capped at what it holds, so no rank ever wraps around and re-reads tokens.
func NewEvalLoader(opts LoaderOptions, maxBatches int) (*EvalLoader, error) {
	if opts.Shuffle {
		return nil, fmt.Errorf("eval loader: the validation split is read in order; Shuffle must be false")
	}
	l, err := NewLoader(opts)
	if err != nil {
		return nil, fmt.Errorf("eval loader: %w", err)
	}
	total := l.BatchesPerEpoch()
	n := total
	if maxBatches > 0 {
		n = min(n, int64(maxBatches))
	}
	return &EvalLoader{l: l, numBatches: n, total: total}, nil
}

// NumBatches is how many micro-batches one pass yields on every rank.
func (e *EvalLoader) NumBatches() int64 { return e.numBatches }

// Next fills inputs and targets (each length B·T) with the next batch, or
// returns io.EOF once NumBatches batches were served.
func (e *EvalLoader) Next(inputs, targets []int32) error {
	if e.done >= e.numBatches {
		return io.EOF
	}
	if len(inputs) != int(e.l.bt) || len(targets) != int(e.l.bt) {
		panic("data: EvalLoader.Next needs inputs and targets of length B*T")
	}
	idx := e.done * e.total / e.numBatches
	if e.l.rows != nil {
		if err := e.l.rows.readGroup(0, idx, inputs, targets); err != nil {
			return err
		}
		e.done++
		return nil
	}
	for _, si := range e.l.epochShardOrder(0) {
		if g := e.l.shards[si].groups; idx >= g {
			idx -= g
			continue
		}
		if err := e.l.read(si, idx, inputs, targets); err != nil {
			return err
		}
		e.done++
		return nil
	}
	panic("data: eval batch beyond the split")
}

// Masked reports whether the split's shards have loss-mask companions.
func (e *EvalLoader) Masked() bool { return e.l.masked }

// Reset goes back to the first batch.
func (e *EvalLoader) Reset() { e.done = 0 }

// Close releases the open shard file.
func (e *EvalLoader) Close() error { return e.l.Close() }
