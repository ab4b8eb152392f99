package trainer

import (
	"fmt"
)

// DeepSpeed's curriculum_learning (curriculum_type "seqlen") as Megatron's
// GPT runs it: the loader still reads full SeqLen samples (so the data
// position is the one a run without the curriculum has), and every sample
// of optimizer step n is cut to its first config.Curriculum.SeqLen(n)
// tokens and targets. The model's activations are reserved for SeqLen, so
// a shorter step allocates nothing. Evaluation runs at the full SeqLen.

// checkCurriculum refuses a curriculum the run cannot honour.
func checkCurriculum(o Options) error {
	c := o.Config.Curriculum
	if !c.Enabled {
		return nil
	}
	if o.Stage != nil {
		return fmt.Errorf("%s: curriculum_learning and --stages both set a sequence-length schedule; use one (set \"enabled\": false, or drop --stages)", o.Config.File)
	}
	if c.MaxDifficulty > o.SeqLen {
		return fmt.Errorf("%s: curriculum_learning.max_difficulty %d is above --seq-len %d; samples are cut from --seq-len tokens, so set max_difficulty ≤ %d or raise --seq-len",
			o.Config.File, c.MaxDifficulty, o.SeqLen, o.SeqLen)
	}
	return nil
}

// seqLenAt is optimizer step n's sequence length.
func (r *run) seqLenAt(n int) int {
	if c := r.o.Config.Curriculum; c.Enabled {
		return min(c.SeqLen(n), r.o.SeqLen)
	}
	return r.o.SeqLen
}

// cutBatch returns the micro-batch just read into r.inputs and r.targets
// (B rows of SeqLen) with each row cut to its first T tokens; T = SeqLen
// returns them as they are.
func (r *run) cutBatch(T int) (in, tg []int32) {
	full := r.o.SeqLen
	if T == full {
		return r.inputs, r.targets
	}
	B := len(r.inputs) / full
	for b := range B {
		// Row b moves to offset b·T; rows never overlap their source
		// wrongly since b·T ≤ b·full.
		copy(r.inputs[b*T:(b+1)*T], r.inputs[b*full:b*full+T])
		copy(r.targets[b*T:(b+1)*T], r.targets[b*full:b*full+T])
	}
	return r.inputs[:B*T], r.targets[:B*T]
}
