package trainer

// BatchSource supplies training micro-batches: Next fills inputs with B·T
// token ids (row-major (B, T)) and targets with the B·T ids that follow
// each. data.Loader is one; a benchmark's random tokens another.
type BatchSource interface {
	Next(inputs, targets []int32) error
}

// MaskedSource is a BatchSource whose targets may be ignored: a negative
// target (-100, PyTorch's ignore_index) is a masked prompt token or
// padding. Every step's loss is the mean over the unmasked targets of all
// micro-batches on all ranks, counted from the batches whatever the
// source; Masked says where the loss is summed (run.forward): on the host
// from each micro-batch's mean when true, on the device otherwise.
// data.Loader over shards with loss-mask companions is one.
type MaskedSource interface {
	BatchSource
	Masked() bool
}

// isMasked reports whether b yields ignored targets.
func isMasked(b any) bool {
	m, ok := b.(MaskedSource)
	return ok && m.Masked()
}

// countTargets is the number of targets that are not ignored.
func countTargets(targets []int32) int64 {
	var n int64
	for _, t := range targets {
		if t >= 0 {
			n++
		}
	}
	return n
}

// zeroBatches is a BatchSource of token 0 everywhere: what an estimate on
// an accounting backend feeds the model, which reads no values anyway.
type zeroBatches struct{}

func (zeroBatches) Next(inputs, targets []int32) error {
	clear(inputs)
	clear(targets)
	return nil
}
