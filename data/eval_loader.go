package data

import (
	"fmt"
	"io"
)

// EvalLoader reads the validation split from its start, in the same per-rank
// order as Loader and never shuffled, for a fixed number of micro-batches.
// After that Next returns io.EOF until Reset. Not safe for concurrent use.
type EvalLoader struct {
	l          *Loader
	numBatches int64
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
	n := l.BatchesPerEpoch()
	if maxBatches > 0 {
		n = min(n, int64(maxBatches))
	}
	return &EvalLoader{l: l, numBatches: n}, nil
}

// NumBatches is how many micro-batches one pass yields on every rank.
func (e *EvalLoader) NumBatches() int64 { return e.numBatches }

// Next fills inputs and targets (each length B·T) with the next batch, or
// returns io.EOF once NumBatches batches were served.
func (e *EvalLoader) Next(inputs, targets []int32) error {
	if e.done >= e.numBatches {
		return io.EOF
	}
	if err := e.l.Next(inputs, targets); err != nil {
		return err
	}
	e.done++
	return nil
}

// Reset goes back to the first batch of the split.
func (e *EvalLoader) Reset() {
	e.done = 0
	e.l.st = LoaderState{GroupTokens: e.l.GroupTokens()}
	e.l.shardOrder = e.l.epochShardOrder(0)
}

// Close releases the open shard file.
func (e *EvalLoader) Close() error { return e.l.Close() }
