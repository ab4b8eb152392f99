package zero

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/optim"
)

// ErrNonFiniteGradients is returned (wrapped) by Step when the reduced
// gradients hold a NaN or an infinity. The step is skipped on every rank
// alike and the gradients are cleared; the engine stays usable, so an fp16
// loss scaler can lower its scale and go on.
var ErrNonFiniteGradients = errors.New("zero: the gradients hold a NaN or an infinity; the step was skipped")

// NonFiniteError is the ErrNonFiniteGradients a Step returns: the norm, and
// the tensors (group and tensor index of New's groups) whose reduced
// gradient holds a NaN or an infinity in the part this rank owns (stage 0:
// all of it), so a run can stop naming them.
type NonFiniteError struct {
	Norm    float64
	Rank    int
	Tensors []TensorRef
}

// TensorRef names a tensor by its group and its index in Group.Tensors.
type TensorRef struct{ Group, Tensor int }

func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("%v (norm %v; non-finite in %d tensor(s) of rank %d's part)", ErrNonFiniteGradients, e.Norm, len(e.Tensors), e.Rank)
}

// Unwrap makes errors.Is(err, ErrNonFiniteGradients) hold.
func (e *NonFiniteError) Unwrap() error { return ErrNonFiniteGradients }

// nonFiniteTensors lists the tensors whose reduced gradient, in the part
// this rank holds, is not finite.
func (e *Engine) nonFiniteTensors() []TensorRef {
	var out []TensorRef
	for g, gr := range e.groups {
		lo, n := e.plan.Owned(g, e.rank)
		for ti, t := range gr.Tensors {
			var buf backend.Buffer
			if !e.o.statePartitioned() {
				buf = e.grads.Slice(t.Off, t.Len)
			} else {
				rel := t.Off - gr.Off
				a, b := max(rel, lo), min(rel+t.Len, lo+n)
				if b <= a {
					continue
				}
				buf = e.pgrad.Slice(e.plan.Groups[g].PartOff+a-lo, b-a)
			}
			if e.be.NonFinite(buf) {
				out = append(out, TensorRef{Group: g, Tensor: ti})
			}
		}
	}
	return out
}

// StepInput is one optimizer step's settings.
type StepInput struct {
	// AdamW is the update: the scheduled learning rate, betas, eps, the
	// weight decay of the tensors that take it, and the 1-based count of
	// updates for the bias correction. The engine sets GradScale
	// (unscaling and clipping) and zeroes WeightDecay for the tensors that
	// take none (Tensor.Decay).
	AdamW    backend.AdamWParams
	ClipNorm float64 // gradient_clipping: the largest global L2 norm; ≤ 0 turns clipping off
	// LossScale is the factor the loss was multiplied by before backward
	// (fp16's loss scaler; 0 or 1: none), so the gradients carry it. Step
	// reports and clips by the unscaled norm and divides it out in AdamW.
	LossScale float64
}

// Step ends a step: it finishes the gradient reduction (stage 0: bucketed
// all-reduce; stage 1: a reduce-scatter per group; stages 2–3: the
// reductions still in flight), computes the global L2 norm of the reduced
// gradients divided by the loss scale S, runs AdamW on this rank's share
// with the gradients multiplied by min(1, ClipNorm/(norm+1e-6))/S —
// DeepSpeed's division by the combined scale
// S·max(1, (norm+1e-6)/ClipNorm) — refreshes the parameters (stages 1–2:
// all-gather per group; stage 3: the persistent groups) and clears the
// gradients. It returns the unscaled norm before clipping. A NaN or an
// infinity in the reduced gradients (an fp16 overflow) skips the update on
// every rank with ErrNonFiniteGradients. Every rank must call it.
func (e *Engine) Step(ctx context.Context, in StepInput) (float64, error) {
	if err := e.usable(); err != nil {
		return 0, err
	}
	if e.o.Inference {
		return 0, errors.New("zero: an inference engine cannot step; build the engine without Options.Inference to train")
	}
	if in.AdamW.Step < 1 {
		return 0, fmt.Errorf("zero: optimizer step %d: steps count from 1", in.AdamW.Step)
	}
	scale := in.LossScale
	if scale == 0 {
		scale = 1
	}
	if !(scale > 0) || math.IsInf(scale, 0) {
		return 0, fmt.Errorf("zero: loss scale %v must be positive and finite", in.LossScale)
	}
	if err := e.reduce(ctx); err != nil {
		return 0, err
	}
	sq, err := e.sumSquares(ctx)
	if err != nil {
		return 0, err
	}
	// With a power-of-two scale both divisions are exact, so a scaled
	// step matches the unscaled one bit for bit.
	norm := math.Sqrt(sq) / scale
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		bad := e.nonFiniteTensors()
		e.zeroGrads()
		return norm, &NonFiniteError{Norm: norm, Rank: e.rank, Tensors: bad}
	}
	coef := optim.ClipCoef(norm, in.ClipNorm)
	var hp [2]backend.AdamWParams // without and with weight decay
	hp[1] = in.AdamW
	hp[1].GradScale = float32(coef / scale)
	hp[0] = hp[1]
	hp[0].WeightDecay = 0
	if err := e.update(ctx, hp); err != nil {
		return norm, err
	}
	e.zeroGrads()
	if err := e.be.Sync(); err != nil {
		return norm, e.fail(fmt.Errorf("zero: step: %w", err))
	}
	return norm, nil
}

// reduce finishes the reduction of the step's gradients.
func (e *Engine) reduce(ctx context.Context) error {
	var ops []*commOp
	switch {
	case !e.o.statePartitioned():
		bucket := int(min(e.o.ReduceBucketSize, int64(e.total)))
		for off := 0; off < e.total; off += bucket {
			buf := e.grads.Slice(off, min(bucket, e.total-off))
			ops = append(ops, e.submit(ctx, fmt.Sprintf("all-reduce gradient bucket at %d", off), func(ctx context.Context) error {
				return e.c.AllReduce(ctx, buf, comm.Sum)
			}))
		}
	case !e.o.gradsPartitioned():
		for g, gp := range e.plan.Groups {
			dst, src := e.pgrad.Slice(gp.PartOff, gp.Chunk), e.grads.Slice(gp.PaddedOff, gp.Padded)
			ops = append(ops, e.submit(ctx, fmt.Sprintf("reduce-scatter gradients of group %d", g), func(ctx context.Context) error {
				return e.c.ReduceScatter(ctx, dst, src, comm.Sum)
			}))
		}
	default:
		for g := range e.gradHeld {
			return e.fail(fmt.Errorf("zero: step while group %d's gradients are acquired and not ready", g))
		}
		if err := e.reap(ctx, 0); err != nil {
			return err
		}
		if e.o.paramsPartitioned() {
			return e.dropWindows()
		}
	}
	return e.waitAll(ctx, ops)
}

// waitAll waits for ops in order, stopping at the first failure.
func (e *Engine) waitAll(ctx context.Context, ops []*commOp) error {
	for _, op := range ops {
		if err := e.wait(ctx, op); err != nil {
			return err
		}
	}
	return nil
}

// sumSquares is Σg² over the whole reduced gradient. Stage 0 holds it all
// (bit-identical on every rank). Stages ≥ 1 add the ranks' partition sums
// (padding is zero): each rank's float64 travels as raw bits in an
// all-gather and every rank adds them in rank order, so the result is exact
// to float64 and the same everywhere, which keeps every rank's clipping and
// skip decision identical.
func (e *Engine) sumSquares(ctx context.Context) (float64, error) {
	if !e.o.statePartitioned() {
		return e.be.SumSquares(e.grads), nil
	}
	local := e.be.SumSquares(e.pgrad)
	var total float64
	op := e.submit(ctx, "all-gather gradient sums of squares", func(ctx context.Context) error {
		var one [8]byte
		binary.LittleEndian.PutUint64(one[:], math.Float64bits(local))
		if err := e.be.Upload(e.sqOne, one[:]); err != nil {
			return err
		}
		if err := e.c.AllGather(ctx, e.sqAll, e.sqOne); err != nil {
			return err
		}
		all := make([]byte, e.sqAll.Bytes())
		if err := e.be.Download(all, e.sqAll); err != nil {
			return err
		}
		for r := range e.plan.World {
			total += math.Float64frombits(binary.LittleEndian.Uint64(all[8*r:]))
		}
		return nil
	})
	if err := e.wait(ctx, op); err != nil {
		return 0, err
	}
	return total, nil
}

// update runs AdamW on this rank's share and refreshes the parameters.
// hp[0] is for tensors without weight decay, hp[1] with.
func (e *Engine) update(ctx context.Context, hp [2]backend.AdamWParams) error {
	switch {
	case !e.o.statePartitioned():
		for _, segs := range e.segs {
			for _, s := range segs {
				p := hp[0]
				if s.decay {
					p = hp[1]
				}
				var master backend.Buffer
				if !e.master.IsNil() {
					master = e.master.Slice(s.off, s.n)
				}
				e.be.AdamW(e.params.Slice(s.off, s.n), master, e.grads.Slice(s.off, s.n), e.m.Slice(s.off, s.n), e.v.Slice(s.off, s.n), p)
			}
		}
		return nil
	case e.o.paramsPartitioned():
		var ops []*commOp
		for g, gp := range e.plan.Groups {
			if _, err := e.updateGroup(g, e.params.Slice(gp.PartOff, gp.Chunk), hp); err != nil {
				return err
			}
			if e.persistent[g] {
				dst := e.persistBuf[g]
				ops = append(ops, e.submit(ctx, fmt.Sprintf("all-gather persistent group %d", g), func(ctx context.Context) error {
					return e.allGatherChunk(ctx, dst, g)
				}))
			}
		}
		return e.waitAll(ctx, ops)
	}
	// Whole parameters with partitioned state: AdamW's result goes into one
	// of two staging buffers while the previous group's chunk is being
	// all-gathered from the other, straight into the full parameters.
	var pending [2]*commOp
	for g, gp := range e.plan.Groups {
		k := g % 2
		if pending[k] != nil {
			if err := e.wait(ctx, pending[k]); err != nil {
				return err
			}
		}
		st := e.staging[k].Slice(0, gp.Chunk)
		n, err := e.updateGroup(g, st, hp)
		if err != nil {
			return err
		}
		if n < gp.Chunk {
			e.be.Zero(st.Slice(n, gp.Chunk-n)) // the group's padding: keep it zero
		}
		dst := e.params.Slice(gp.PaddedOff, gp.Padded)
		pending[k] = e.submit(ctx, fmt.Sprintf("all-gather parameters of group %d", g), func(ctx context.Context) error {
			return e.c.AllGather(ctx, dst, st)
		})
	}
	for _, op := range pending {
		if op != nil {
			if err := e.wait(ctx, op); err != nil {
				return err
			}
		}
	}
	return nil
}
