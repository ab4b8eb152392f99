package trainer

import (
	"fmt"
	"math/rand/v2"
)

// SyntheticBatches is a BatchSource of uniformly random token ids in
// [0, Vocab): what `gotrain train --data synthetic` trains on to smoke-test
// the whole path (launch, rendezvous, ZeRO, offload, checkpoints) for any
// model and vocabulary without preparing data. Each rank draws its own
// stream, seeded by (seed, rank), so ranks see different batches as they
// would with real data; the stream is the same for the same seed. Like
// llm.c's loader, a micro-batch is B·T+1 consecutive tokens: targets are
// the inputs shifted by one. Not safe for concurrent use.
//
// A run fed by it keeps no data position in its checkpoints: a resumed run
// draws the stream from its start again, which for random tokens changes
// nothing that matters.
type SyntheticBatches struct {
	rng   *rand.Rand
	vocab int
	buf   []int32
}

// NewSyntheticBatches returns rank's stream of random ids below vocab.
func NewSyntheticBatches(seed uint64, rank, vocab int) (*SyntheticBatches, error) {
	if vocab < 2 || vocab > 1<<31-1 {
		return nil, fmt.Errorf("synthetic data: vocabulary of %d ids; want 2 to 2³¹-1", vocab)
	}
	if rank < 0 {
		return nil, fmt.Errorf("synthetic data: rank %d", rank)
	}
	// The rank goes into the second word so that rank r of seed s and rank
	// 0 of seed s+r draw different streams.
	return &SyntheticBatches{rng: rand.New(rand.NewPCG(seed, 0x5eed0000+uint64(rank))), vocab: vocab}, nil
}

// Next fills inputs with B·T random ids and targets with the ids that
// follow each.
func (s *SyntheticBatches) Next(inputs, targets []int32) error {
	if len(inputs) != len(targets) {
		panic("trainer: SyntheticBatches.Next: inputs and targets differ in length")
	}
	n := len(inputs)
	if cap(s.buf) < n+1 {
		s.buf = make([]int32, n+1)
	}
	b := s.buf[:n+1]
	for i := range b {
		b[i] = int32(s.rng.IntN(s.vocab))
	}
	copy(inputs, b[:n])
	copy(targets, b[1:])
	return nil
}
