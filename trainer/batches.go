package trainer

// BatchSource supplies training micro-batches: Next fills inputs with B·T
// token ids (row-major (B, T)) and targets with the B·T ids that follow
// each. data.Loader is one; a benchmark's random tokens another.
type BatchSource interface {
	Next(inputs, targets []int32) error
}

// zeroBatches is a BatchSource of token 0 everywhere: what an estimate on
// an accounting backend feeds the model, which reads no values anyway.
type zeroBatches struct{}

func (zeroBatches) Next(inputs, targets []int32) error {
	clear(inputs)
	clear(targets)
	return nil
}
