package trainer

import (
	"context"
	"encoding/binary"
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

// step runs optimizer step n: forward and backward over the micro-batches,
// one all-reduce of the loss and the stop flag, and the engine's step
// (reduction, clipping, AdamW). It reports whether some rank was asked to
// stop.
func (r *run) step(ctx context.Context, n int) (rec metrics.StepRecord, stop bool, err error) {
	t0 := time.Now()
	r.curT, r.curStep = r.seqLenAt(n), n
	if err := r.eng.ZeroGrad(); err != nil {
		return rec, false, err
	}
	lossScale := 1.0
	if r.scaler != nil {
		lossScale = r.scaler.Scale()
	}
	commBefore := commSeconds(r.c.Stats())
	var fwd, bwd time.Duration
	var lossAt func() (float64, bool, error)
	// gradScale is what the gradients carry beyond the mean's: fp16's loss
	// scale, and for masked data the ratio of the step's unmasked targets
	// to its B·T·gas·world positions (see forwardBackwardMasked).
	gradScale := lossScale
	if isMasked(r.batches) {
		var sum float64
		var count int64
		if sum, count, fwd, bwd, err = r.forwardBackwardMasked(lossScale); err != nil {
			return rec, false, err
		}
		mean, global, stopped, err := r.reduceMasked(ctx, sum, count)
		if err != nil {
			return rec, false, err
		}
		if global > 0 {
			gradScale = lossScale * float64(global) / float64(r.stepPositions())
		}
		lossAt = func() (float64, bool, error) { return mean, stopped, nil }
	} else {
		if fwd, bwd, err = r.forwardBackward(lossScale); err != nil {
			return rec, false, err
		}
		if lossAt, err = r.reduceLoss(ctx); err != nil {
			return rec, false, err
		}
	}
	tOpt := time.Now()
	lr, norm, overflow, err := r.optimize(lossScale, gradScale)
	if err != nil {
		return rec, false, err
	}
	optDur := time.Since(tOpt)
	loss, stop, err := lossAt()
	if err != nil {
		return rec, false, err
	}
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return rec, false, fmt.Errorf("loss is %v; lower the learning rate or enable gradient_clipping", loss)
	}
	if err := r.be.Sync(); err != nil {
		return rec, false, err
	}
	dt := time.Since(t0)
	perStep := r.tokensPerStep()
	r.tokens += perStep
	rec = metrics.StepRecord{
		Step: n, Loss: loss, LR: lr, GradNorm: norm, LossScale: lossScale, Tokens: r.tokens,
		TokensPerSecond: float64(perStep) / dt.Seconds(), StepSeconds: dt.Seconds(),
		Skipped: overflow, SkippedSteps: r.skipped,
		ForwardSeconds: fwd.Seconds(), BackwardSeconds: bwd.Seconds(), OptimizerSeconds: optDur.Seconds(),
		CommSeconds: commSeconds(r.c.Stats()) - commBefore,
	}
	rec.MFU = metrics.MFU(rec.TokensPerSecond/float64(r.world), r.flopsPerToken(r.curT), r.o.PeakFLOPS)
	return rec, stop, nil
}

// flopsPerToken is the training cost of a token at sequence length T that
// MFU divides by: the full model's, or a LoRA run's (no weight gradients
// for the frozen base, the adapters' own products).
func (r *run) flopsPerToken(T int) float64 {
	if r.adapters != nil {
		return r.adapters.FlopsPerToken(T)
	}
	return r.o.Model.FlopsPerToken(T)
}

// stepPositions is B·T·gas·world, every target position of one optimizer
// step on all ranks, masked or not.
func (r *run) stepPositions() int64 {
	b := r.o.Batch
	return int64(b.MicroBatch) * int64(r.curT) * int64(b.GradAccum) * int64(r.world)
}

// tokensPerStep is every rank's tokens of one optimizer step.
func (r *run) tokensPerStep() int64 {
	b := r.o.Batch
	return int64(b.MicroBatch) * int64(r.curT) * int64(b.GradAccum) * int64(r.world)
}

// forwardBackward queues the step's micro-batches; the sum of their
// per-token losses accumulates on the device in r.scalars[0] (reduceLoss
// reads it). Scaling each micro-batch's gradient by 1/(B·T·gas·world)
// makes the gradient summed over micro-batches and reduced (summed) over
// ranks that of the global mean. fp16 multiplies it by the loss scale,
// which the engine's step divides out.
func (r *run) forwardBackward(lossScale float64) (fwd, bwd time.Duration, err error) {
	B, T, gas := r.o.Batch.MicroBatch, r.curT, r.o.Batch.GradAccum
	dloss := float32(lossScale / float64(B*T*gas*r.world))
	lossSum := r.scalars.Slice(0, 1)
	r.be.Zero(lossSum)
	for mb := range gas {
		if err := r.batches.Next(r.in, r.tg); err != nil {
			return fwd, bwd, fmt.Errorf("read batch: %w", err)
		}
		in, tg := r.cutBatch(T)
		t := time.Now()
		r.m.Train(backend.DropoutSeed(r.o.Seed, r.curStep, mb, r.rank)) // as in forwardBackwardMasked
		if err := r.m.ForwardQueued(in, tg, B, T, lossSum); err != nil {
			return fwd, bwd, fmt.Errorf("forward: %w", err)
		}
		fwd += time.Since(t)
		t = time.Now()
		if err := r.m.Backward(dloss); err != nil {
			return fwd, bwd, fmt.Errorf("backward: %w", err)
		}
		bwd += time.Since(t)
	}
	return fwd, bwd, nil
}

// reduceLoss returns the function that gives the global mean loss of the
// step's micro-batches and whether any rank's run context was cancelled (a
// signal). With several ranks both travel in one all-reduce now, so every
// rank agrees on both. A single rank on a backend that can queue reads
// (a GPU) reads its loss with the optimizer step's own synchronisation:
// one host wait less per step.
func (r *run) reduceLoss(ctx context.Context) (func() (float64, bool, error), error) {
	tokens := float64(r.o.Batch.MicroBatch * r.curT * r.o.Batch.GradAccum)
	stop := 0.0
	if ctx.Err() != nil {
		stop = 1
	}
	if r.world == 1 {
		if q, ok := r.be.(backend.QueuedReader); ok {
			read := q.QueueRead(r.scalars.Slice(0, 1))
			return func() (float64, bool, error) {
				raw, err := read()
				if err != nil {
					return 0, false, err
				}
				return float64(math.Float32frombits(binary.NativeEndian.Uint32(raw))) / tokens, stop != 0, nil
			}, nil
		}
		v, err := backend.ReadF32(r.be, r.scalars.Slice(0, 1))
		if err != nil {
			return nil, err
		}
		return func() (float64, bool, error) { return float64(v[0]) / tokens, stop != 0, nil }, nil
	}
	if err := backend.WriteF32(r.be, r.scalars.Slice(1, 1), []float32{float32(stop)}); err != nil {
		return nil, err
	}
	err := r.eng.Collective(r.cctx, "loss and stop flag", func(ctx context.Context, c comm.Comm) error {
		return c.AllReduce(ctx, r.scalars.Slice(0, 2), comm.Avg)
	})
	if err != nil {
		return nil, err
	}
	v, err := backend.ReadF32(r.be, r.scalars.Slice(0, 2))
	if err != nil {
		return nil, err
	}
	return func() (float64, bool, error) { return float64(v[0]) / tokens, v[1] > 0, nil }, nil
}

// forwardBackwardMasked runs the step's micro-batches of masked data and
// returns this rank's sum of token losses over its unmasked targets and
// their count. The step's loss is that sum over all micro-batches and
// ranks divided by the global count (Hugging Face's Trainer since its
// gradient-accumulation fix), not a mean of per-micro-batch means. The
// count is known only after the last micro-batch on every rank, so each
// backward runs with the plain stream's 1/(B·T·gas·world) and the engine's
// step divides the reduced gradient by count/(B·T·gas·world) (≤ 1, so the
// gradients are never larger than a plain step's, which keeps fp16's
// overflow behaviour) together with the loss scale.
func (r *run) forwardBackwardMasked(lossScale float64) (sum float64, count int64, fwd, bwd time.Duration, err error) {
	B, T, gas := r.o.Batch.MicroBatch, r.curT, r.o.Batch.GradAccum
	dloss := float32(lossScale / float64(r.stepPositions()))
	for mb := range gas {
		if err := r.batches.Next(r.in, r.tg); err != nil {
			return 0, 0, fwd, bwd, fmt.Errorf("read batch: %w", err)
		}
		in, tg := r.cutBatch(T)
		n := countTargets(tg)
		t := time.Now()
		// A training pass: LoRA's dropout (when on) draws the masks of
		// this step, micro-batch and rank, the same after a resume.
		r.m.Train(backend.DropoutSeed(r.o.Seed, r.curStep, mb, r.rank))
		l, err := r.m.Forward(in, tg, B, T)
		if err != nil {
			return 0, 0, fwd, bwd, fmt.Errorf("forward: %w", err)
		}
		fwd += time.Since(t)
		t = time.Now()
		if err := r.m.Backward(dloss); err != nil {
			return 0, 0, fwd, bwd, fmt.Errorf("backward: %w", err)
		}
		bwd += time.Since(t)
		sum += float64(l) * float64(n)
		count += n
	}
	return sum, count, fwd, bwd, nil
}

// countSplit splits a target count into two float32-exact halves so that
// their sums over ranks stay exact far beyond float32's 2^24.
const countSplit = 1 << 16

// reduceMasked sums the ranks' loss sums and target counts and learns the
// stop flag, in the one all-reduce a plain step also makes. It returns the
// global mean loss (0 when no target of the step is unmasked, whose
// gradient is zero) and the global count.
func (r *run) reduceMasked(ctx context.Context, sum float64, count int64) (float64, int64, bool, error) {
	stop := 0.0
	if ctx.Err() != nil {
		stop = 1
	}
	if r.world > 1 {
		v := []float32{float32(sum), float32(stop), float32(count / countSplit), float32(count % countSplit)}
		if err := backend.WriteF32(r.be, r.scalars, v); err != nil {
			return 0, 0, false, err
		}
		err := r.eng.Collective(r.cctx, "loss, target count and stop flag", func(ctx context.Context, c comm.Comm) error {
			return c.AllReduce(ctx, r.scalars, comm.Sum)
		})
		if err != nil {
			return 0, 0, false, err
		}
		if v, err = backend.ReadF32(r.be, r.scalars); err != nil {
			return 0, 0, false, err
		}
		sum, stop, count = float64(v[0]), float64(v[1]), int64(v[2])*countSplit+int64(v[3])
	}
	if count == 0 {
		return 0, 0, stop != 0, nil
	}
	return sum / float64(count), count, stop != 0, nil
}

// optimize runs the engine's step with this step's scheduled
// hyperparameters and advances the loss scaler and the scheduler. An fp16
// overflow skips the update (reported, not an error); a NaN or Inf
// gradient without fp16 stops the run, naming the tensors.
// gradScale is the factor the gradients carry (lossScale, times the
// masked-target ratio for masked data), which the engine divides out.
func (r *run) optimize(lossScale, gradScale float64) (lr, norm float64, overflow bool, err error) {
	hp := r.opt.Scheduled(r.sch)
	hp.LR *= r.lrScale()
	norm, err = r.eng.Step(r.cctx, zero.StepInput{AdamW: hp.Params(r.updates + 1), ClipNorm: r.o.Config.GradientClipping, LossScale: gradScale})
	overflow = errors.Is(err, zero.ErrNonFiniteGradients)
	switch {
	case overflow && r.scaler == nil:
		return hp.LR, norm, false, fmt.Errorf("%s; lower the learning rate or enable gradient_clipping", r.nonFinite(err, norm))
	case err != nil && !overflow:
		return hp.LR, norm, false, err
	}
	if r.scaler != nil {
		// DeepSpeed's dynamic loss scaler: every rank saw the same reduced
		// gradients, so every rank agrees on the overflow.
		skipped, err := r.scaler.Update(overflow)
		if err != nil {
			return hp.LR, norm, overflow, err
		}
		if skipped {
			r.skipped++
		}
	}
	if !overflow {
		r.updates++
		r.sch.Step() // not stepped on fp16 overflow steps, as DeepSpeed
	}
	return hp.LR, norm, overflow, nil
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
	res.Steps, res.FinalLoss, res.SkippedSteps = n, rec.Loss, r.skipped
	print := n%r.o.PrintEvery == 0 || n == r.startStep || n == r.o.MaxSteps
	if print {
		mem, err := r.memory()
		if err != nil {
			return err
		}
		rec.Memory = mem
	}
	if err := r.writeLog(*rec); err != nil {
		return err
	}
	if r.o.Observer != nil {
		r.o.Observer.ObserveStep(*rec, r.be.Memory(), commCounters(r.c.Stats()))
	}
	if len(r.monitors) > 0 {
		// DeepSpeed's monitors put samples, not steps, on the x-axis.
		samples := int64(n) * int64(r.o.Batch.TrainBatchSize)
		if err := r.monitors.Write(metrics.StepEvents(*rec, samples, r.scaler != nil)); err != nil {
			return fmt.Errorf("monitor: %w", err)
		}
	}
	r.breakdown.Add(rec.ForwardSeconds, rec.BackwardSeconds, rec.CommSeconds, rec.OptimizerSeconds)
	if print {
		r.prog.Line(*rec, time.Since(r.start), r.be.Memory().PoolTotal(backend.Device))
		if r.o.Config.WallClockBreakdown {
			fmt.Fprintln(r.o.Log, r.breakdown.Line())
			r.breakdown.Reset()
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
		res.TokensPerSecond = float64(r.tokens-r.tokens0-r.tokensPerStep()) / time.Since(r.afterFirst).Seconds()
		res.MFU = metrics.MFU(res.TokensPerSecond/float64(r.world), r.flopsPerToken(o.SeqLen), o.PeakFLOPS)
	}
	res.Memory = r.be.Memory()
	if o.OutputDir == "" {
		return nil
	}
	save := r.saveWeights
	if r.base != nil {
		save = r.saveAdapter
	}
	path, err := save()
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
