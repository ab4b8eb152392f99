package data

import "fmt"

// SameOrderAs reports whether this loader serves the samples of its shards
// in the same order as a loader of the same shards and sequence length
// whose position is saved (its group geometry: B·T·N tokens, or B·N rows,
// per micro-step on all ranks), for a run that takes the same number of
// samples per optimizer step. It returns nil when they do, else why not.
//
// An optimizer step takes gradient_accumulation consecutive groups, which
// together are a run of consecutive samples of the epoch's order (rank r's
// share of a group is the r-th chunk of it). So two geometries with the
// same samples per step read the same samples step after step exactly when
// their epochs are one sequence: the same samples dropped at the end of
// each shard (a token stream drops the tokens after its last whole group)
// or of each epoch (rows past the last whole group), and, when shuffling,
// the same permutation (rows are permuted one by one, whatever the group;
// a token stream's groups are permuted, so only the same group size keeps
// the order).
func (l *Loader) SameOrderAs(saved LoaderState) error {
	if l.rows != nil {
		return l.rows.sameOrderAs(saved)
	}
	g := l.GroupTokens()
	switch {
	case saved.GroupRows != 0 || saved.GroupTokens == 0:
		return fmt.Errorf("the checkpoint's run read rows one per sample, this one reads a token stream")
	case saved.GroupTokens == g:
		return nil
	case l.shuffle:
		return fmt.Errorf("shuffling permutes groups of B·T·N tokens, %d in the checkpoint's run and %d in this one, so the two orders differ",
			saved.GroupTokens, g)
	}
	for _, s := range l.sizes {
		if a, b := usedTokens(s.tokens, saved.GroupTokens), usedTokens(s.tokens, g); a != b {
			return fmt.Errorf("shard %s (%d tokens) gives whole micro-steps of B·T·N = %d tokens for its first %d targets in the checkpoint's run, "+
				"but of %d tokens for %d in this one, so the steps after it take other samples", s.path, s.tokens, saved.GroupTokens, a, g, b)
		}
	}
	return nil
}

// usedTokens is how many of a shard's n tokens llm.c's order reads with
// groups of g tokens: the whole groups, each with its one token of lookahead
// inside the shard.
func usedTokens(n, g int64) int64 {
	if n < 1 {
		return 0
	}
	return (n - 1) / g * g
}

// sameOrderAs is SameOrderAs for one sample per row: the rows of an epoch
// are taken in whole groups of B·N, the rest dropped, and a shuffle
// permutes single rows, the same for every group size.
func (r *rowLoader) sameOrderAs(saved LoaderState) error {
	if saved.GroupTokens != 0 || saved.GroupRows == 0 {
		return fmt.Errorf("the checkpoint's run read a token stream, this one reads rows one per sample")
	}
	total := r.base[len(r.shards)]
	if a, b := total/saved.GroupRows*saved.GroupRows, r.groups*r.nb; a != b {
		return fmt.Errorf("each epoch of %d rows serves %d of them in groups of B·N = %d rows in the checkpoint's run, but %d in groups of %d in this one, so the epochs differ",
			total, a, saved.GroupRows, b, r.nb)
	}
	return nil
}
