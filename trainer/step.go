package trainer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/checkpoint"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/metrics"
	"github.com/gotrain/gotrain/zero"
)

// loop runs the steps from startStep to MaxSteps. A signal (the run
// context's cancellation) is noticed by every rank at the same step, which
// is finished, saved and reported as a *StoppedError.
func (r *run) loop(ctx context.Context) (*Result, error) {
	res := r.res
	res.StartStep, res.ResumedFrom = r.startStep, r.resumedTag
	if r.val != nil && r.startStep == 1 {
		vl, err := r.evaluate(0)
		if err != nil {
			return nil, err
		}
		res.FirstValLoss = vl
	}
	r.start = time.Now()
	for n := r.startStep; n <= r.o.MaxSteps; n++ {
		rec, stop, err := r.step(ctx, n)
		if err != nil {
			return res, fmt.Errorf("step %d: %w", n, err)
		}
		if err := r.report(&rec); err != nil {
			return res, fmt.Errorf("step %d: %w", n, err)
		}
		if stop {
			return res, r.stopAt(ctx, n)
		}
		if err := r.saveOrEval(n); err != nil {
			return res, err
		}
	}
	return res, r.finish()
}

// step runs optimizer step n as llm.c's loop does: zero the gradients;
// forward and backward each micro-batch; one all-reduce of the loss sums,
// unmasked-target counts and stop flags; the engine's step (reduction,
// clipping, AdamW); the step's record. It reports whether some rank was
// asked to stop.
func (r *run) step(ctx context.Context, n int) (metrics.StepRecord, bool, error) {
	t0, comm0 := time.Now(), commSeconds(r.c.Stats())
	T := r.seqLenAt(n)
	if err := r.eng.ZeroGrad(); err != nil {
		return metrics.StepRecord{}, false, err
	}
	lossScale := r.opt.lossScale()
	local, fwd, bwd, err := r.forwardBackward(n, T, float32(lossScale/float64(r.positions(T))))
	if err != nil {
		return metrics.StepRecord{}, false, err
	}
	local.stop = ctx.Err() != nil
	total, err := r.reduce(local)
	if err != nil {
		return metrics.StepRecord{}, false, err
	}
	tOpt := time.Now()
	lr, norm, overflow, err := r.optimize(total.gradScale(lossScale, r.positions(T)))
	if err != nil {
		return metrics.StepRecord{}, false, err
	}
	optDur := time.Since(tOpt)
	loss, err := total.mean()
	if err != nil {
		return metrics.StepRecord{}, false, err
	}
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return metrics.StepRecord{}, false, fmt.Errorf("loss is %v; lower the learning rate or enable gradient_clipping", loss)
	}
	if err := r.be.Sync(); err != nil {
		return metrics.StepRecord{}, false, err
	}
	dt := time.Since(t0)
	r.tokens += r.positions(T)
	rec := metrics.StepRecord{
		Step: n, Loss: loss, LR: lr, GradNorm: norm, LossScale: lossScale, Tokens: r.tokens,
		TokensPerSecond: float64(r.positions(T)) / dt.Seconds(), StepSeconds: dt.Seconds(),
		Skipped: overflow, SkippedSteps: r.opt.skipped,
		ForwardSeconds: fwd.Seconds(), BackwardSeconds: bwd.Seconds(), OptimizerSeconds: optDur.Seconds(),
		CommSeconds: commSeconds(r.c.Stats()) - comm0,
	}
	rec.MFU = metrics.MFU(rec.TokensPerSecond/float64(r.world), r.tr.flopsPerToken(T), r.o.PeakFLOPS)
	return rec, total.stop, nil
}

// positions is B·T·gas·world at sequence length T: every target position
// of one optimizer step on all ranks, masked or not, which is also the
// step's tokens.
func (r *run) positions(T int) int64 {
	b := r.o.Batch
	return int64(b.MicroBatch) * int64(T) * int64(b.GradAccum) * int64(r.world)
}

// forwardBackward runs step n's micro-batches at sequence length T and
// returns this rank's loss sum and unmasked-target count. Every backward
// gets dloss, the gradient of one target of a mean over all B·T·gas·world
// positions (times fp16's loss scale); lossSums.gradScale corrects for the
// masked ones once the global count is known.
func (r *run) forwardBackward(n, T int, dloss float32) (s lossSums, fwd, bwd time.Duration, err error) {
	B := r.o.Batch.MicroBatch
	s = r.startLoss()
	for mb := range r.o.Batch.GradAccum {
		if err := r.batches.Next(r.inputs, r.targets); err != nil {
			return s, fwd, bwd, fmt.Errorf("read batch: %w", err)
		}
		in, tg := r.cutBatch(T)
		t := time.Now()
		// A training pass: LoRA's dropout (when on) draws the masks of
		// this step, micro-batch and rank, the same after a resume.
		r.m.Train(backend.DropoutSeed(r.o.Seed, n, mb, r.rank))
		if err := r.forward(in, tg, B, T, &s); err != nil {
			return s, fwd, bwd, fmt.Errorf("forward: %w", err)
		}
		fwd += time.Since(t)
		t = time.Now()
		if err := r.m.Backward(dloss); err != nil {
			return s, fwd, bwd, fmt.Errorf("backward: %w", err)
		}
		bwd += time.Since(t)
	}
	return s, fwd, bwd, nil
}

// optimize runs the optimizer's step (optimizer.step); a NaN or Inf
// gradient without fp16 stops the run, naming the tensors.
func (r *run) optimize(gradScale float64) (lr, norm float64, overflow bool, err error) {
	lr, norm, overflow, err = r.opt.step(r.cctx, r.eng, gradScale, r.o.Config.GradientClipping, r.lrScale())
	if !overflow && errors.Is(err, zero.ErrNonFiniteGradients) {
		return lr, norm, false, fmt.Errorf("%s; lower the learning rate or enable gradient_clipping", r.nonFinite(err, norm))
	}
	return lr, norm, overflow, err
}

// report records step rec.Step: metrics.jsonl, the observer, the
// monitors, the run's summary, and on printing steps the progress line
// with every rank's memory (gathered only then: it is a collective every
// rank makes on the same steps).
func (r *run) report(rec *metrics.StepRecord) error {
	n := rec.Step
	res := r.res
	if n == r.startStep {
		r.afterFirst = time.Now()
		res.FirstLoss = rec.Loss
	}
	res.Steps, res.FinalLoss, res.SkippedSteps = n, rec.Loss, r.opt.skipped
	print := n%r.o.PrintEvery == 0 || n == r.startStep || n == r.o.MaxSteps
	if print {
		mem, err := r.memory()
		if err != nil {
			return err
		}
		rec.Memory = mem
	}
	if err := r.logs.write(*rec); err != nil {
		return err
	}
	if r.o.Observer != nil {
		r.o.Observer.ObserveStep(*rec, r.be.Memory(), commCounters(r.c.Stats()))
	}
	if len(r.logs.monitors) > 0 {
		// DeepSpeed's monitors put samples, not steps, on the x-axis.
		samples := int64(n) * int64(r.o.Batch.TrainBatchSize)
		if err := r.logs.monitors.Write(metrics.StepEvents(*rec, samples, r.opt.scaler != nil)); err != nil {
			return fmt.Errorf("monitor: %w", err)
		}
	}
	r.logs.breakdown.Add(rec.ForwardSeconds, rec.BackwardSeconds, rec.CommSeconds, rec.OptimizerSeconds)
	if print {
		r.logs.prog.Line(*rec, time.Since(r.start), r.be.Memory().PoolTotal(backend.Device))
		if r.o.Config.WallClockBreakdown {
			fmt.Fprintln(r.o.Log, r.logs.breakdown.Line())
			r.logs.breakdown.Reset()
		}
	}
	return nil
}

// saveOrEval saves a checkpoint and evaluates when step n is due for them.
func (r *run) saveOrEval(n int) error {
	o := r.o
	last := n == o.MaxSteps
	if last || (o.SaveEvery > 0 && n%o.SaveEvery == 0) {
		if err := r.save(r.cctx, n, r.tokens); err != nil {
			return err
		}
	}
	if r.val != nil && (last || (o.EvalEvery > 0 && n%o.EvalEvery == 0)) {
		vl, err := r.evaluate(n)
		if err != nil {
			return err
		}
		r.res.FinalValLoss = vl
	}
	return nil
}

// stopAt ends a run stopped by a signal after step n: the work done is
// saved, unless step n's tag was just saved (saving it again would only
// replace a good tag).
func (r *run) stopAt(ctx context.Context, n int) error {
	tag := ""
	if r.o.OutputDir != "" {
		if n != r.lastSaved {
			if err := r.save(r.cctx, n, r.tokens); err != nil {
				return err
			}
		}
		tag = checkpoint.TagName(int64(n))
	}
	return &StoppedError{Step: n, Checkpoint: tag, Cause: context.Cause(ctx)}
}

// finish computes the run's throughput and writes the final weights.
func (r *run) finish() error {
	res, o := r.res, r.o
	if o.MaxSteps > r.startStep {
		first := r.positions(r.seqLenAt(r.startStep))
		res.TokensPerSecond = float64(r.tokens-r.tokens0-first) / time.Since(r.afterFirst).Seconds()
		res.MFU = metrics.MFU(res.TokensPerSecond/float64(r.world), r.tr.flopsPerToken(o.SeqLen), o.PeakFLOPS)
	}
	res.Memory = r.be.Memory()
	if o.OutputDir == "" {
		return nil
	}
	path, err := r.tr.save(true)
	res.WeightsPath = path
	return err
}

// nonFinite names the tensors whose gradient is NaN or Inf (in the part this
// rank reduced), for the error that stops a bf16 or fp32 run.
func (r *run) nonFinite(err error, norm float64) string {
	var nf *zero.NonFiniteError
	if !errors.As(err, &nf) || len(nf.Tensors) == 0 {
		return fmt.Sprintf("the gradient norm is %v (NaN or Inf in another rank's part of the gradient)", norm)
	}
	lay := r.m.Layout()
	var names []string
	for _, t := range nf.Tensors {
		names = append(names, lay.GroupTensors(t.Group)[t.Tensor].Name)
	}
	return fmt.Sprintf("the gradient of %s holds NaN or Inf (norm %v)", strings.Join(names, ", "), norm)
}

// commSeconds is the time spent in collectives so far, over every kind.
func commSeconds(s comm.Stats) float64 {
	var t float64
	for _, k := range comm.Kinds() {
		t += s.Of(k).Seconds
	}
	return t
}

// commCounters converts the Comm's statistics for the metrics endpoint.
func commCounters(s comm.Stats) metrics.CommCounters {
	cc := metrics.CommCounters{}
	for _, k := range comm.Kinds() {
		o := s.Of(k)
		cc[k.Label()] = metrics.CommOp{Bytes: o.Bytes, Seconds: o.Seconds}
	}
	return cc
}
