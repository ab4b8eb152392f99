package trainer

import (
	"errors"
	"fmt"
	"io"

	"github.com/gotrain/gotrain/metrics"
)

// evaluate scores the validation split and logs the loss as step n's: the
// mean cross-entropy over every target of the split that is not ignored
// (Hugging Face's Trainer scores every sample once; the mean is
// token-weighted like the training loss), each rank forwarding its share
// of every batch and the loss sums and target counts summed over the
// ranks, the counts exactly.
func (r *run) evaluate(n int) (float64, error) {
	r.val.Reset()
	T := r.o.SeqLen
	var sum float64
	var count int64
	for {
		rows, err := r.val.Next(r.evalInputs, r.evalTargets)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("eval: %w", err)
		}
		in, tg := r.evalInputs[:rows*T], r.evalTargets[:rows*T]
		// A rank whose share of the last batch is empty forwards a row of
		// ignored targets all the same: at ZeRO-3 the forward gathers the
		// parameters with every rank.
		loss, err := r.m.Forward(in, tg, rows, T)
		if err != nil {
			return 0, fmt.Errorf("eval: %w", err)
		}
		if k := countTargets(tg); k > 0 {
			sum += float64(loss) * float64(k)
			count += k
		}
	}
	total, err := r.reduce(lossSums{sum: sum, count: count})
	if err != nil {
		return 0, err
	}
	vl, err := total.mean()
	if err != nil {
		return 0, err
	}
	if total.count == 0 {
		return 0, fmt.Errorf("eval: the validation data (%d samples) has no target that is not masked; pass validation rows with labelled tokens, or train without --val-data", r.val.Samples())
	}
	fmt.Fprintf(r.o.Log, "step %d | val loss %.4f\n", n, vl)
	return vl, r.logs.write(metrics.EvalRecord{Step: n, ValLoss: vl, Batches: int(r.val.NumBatches())})
}
