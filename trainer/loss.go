package trainer

import (
	"context"
	"encoding/binary"
	"math"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
)

// A step's loss is the mean cross-entropy over the unmasked targets of
// all its micro-batches on all ranks (Hugging Face's Trainer since its
// gradient-accumulation fix). Each rank sums the loss and counts the
// targets as its micro-batches go (forward), one all-reduce adds the
// ranks' sums, counts and stop flags (reduce), and lossSums turns the
// totals into the loss and into the factor the gradients carry.

// startLoss begins a step's sums. Token data's per-token losses add up on
// the device (in r.scalars[0], read once per step); masked data's loss
// adds up on the host as each micro-batch's mean (Model.Forward) times its
// count. The two round differently in the last bits, and each kind of
// data keeps its own: the golden runs of cmd/gotrain pin both.
func (r *run) startLoss() lossSums {
	s := lossSums{onDevice: !isMasked(r.batches)}
	if s.onDevice {
		r.be.Zero(r.scalars.Slice(0, 1))
	}
	return s
}

// forward runs one micro-batch's forward and adds its loss and its count
// of unmasked targets to s (see startLoss).
func (r *run) forward(in, tg []int32, B, T int, s *lossSums) error {
	k := countTargets(tg)
	s.count += k
	if s.onDevice {
		return r.m.ForwardQueued(in, tg, B, T, r.scalars.Slice(0, 1))
	}
	l, err := r.m.Forward(in, tg, B, T)
	s.sum += float64(l) * float64(k)
	return err
}

// lossSums is a loss summed over targets, one rank's or all ranks', with
// the count of those targets (those not masked) and whether some rank was
// asked to stop.
type lossSums struct {
	sum   float64
	count int64
	stop  bool
	// onDevice: the sum is in r.scalars[0] until reduce reads it; read,
	// when set, is that read queued behind the step's work.
	onDevice bool
	read     func() ([]byte, error)
}

// mean is the loss: the sum over the count, 0 when every target is masked
// (the gradient is then zero too). A queued read of the sum is waited for
// here.
func (s lossSums) mean() (float64, error) {
	if s.read != nil {
		raw, err := s.read()
		if err != nil {
			return 0, err
		}
		s.sum = float64(math.Float32frombits(binary.NativeEndian.Uint32(raw)))
	}
	if s.count == 0 {
		return 0, nil
	}
	return s.sum / float64(s.count), nil
}

// gradScale is the factor the step's reduced gradients carry beyond the
// gradient of the mean, which the engine's step divides out: backward gave
// every target 1/positions of fp16's loss scale, so the sum over
// micro-batches and ranks is lossScale·count/positions times the mean's.
// Without masked targets that is the loss scale itself (a power of two,
// so dividing it out is exact).
func (s lossSums) gradScale(lossScale float64, positions int64) float64 {
	if s.count == 0 || s.count == positions {
		return lossScale
	}
	return lossScale * float64(s.count) / float64(positions)
}

// countSplit splits a target count into two float32-exact halves so that
// their sums over ranks stay exact far beyond float32's 2^24.
const countSplit = 1 << 16

// reduce sums the ranks' loss sums, target counts and stop flags in one
// all-reduce of [sum, stop, count/2^16, count mod 2^16] (Sum, F32). One
// rank makes none; its device sum (token data) is read then, on a backend
// that can queue reads with the optimizer step's own synchronisation: one
// host wait less per step.
func (r *run) reduce(s lossSums) (lossSums, error) {
	if r.world == 1 {
		if !s.onDevice {
			return s, nil
		}
		if q, ok := r.be.(backend.QueuedReader); ok {
			s.read = q.QueueRead(r.scalars.Slice(0, 1))
			return s, nil
		}
		v, err := backend.ReadF32(r.be, r.scalars.Slice(0, 1))
		if err != nil {
			return s, err
		}
		s.sum = float64(v[0])
		return s, nil
	}
	stop := float32(0)
	if s.stop {
		stop = 1
	}
	v := []float32{float32(s.sum), stop, float32(s.count / countSplit), float32(s.count % countSplit)}
	dst := r.scalars
	if s.onDevice {
		v, dst = v[1:], r.scalars.Slice(1, 3)
	}
	if err := backend.WriteF32(r.be, dst, v); err != nil {
		return s, err
	}
	err := r.eng.Collective(r.cctx, "loss, target count and stop flag", func(ctx context.Context, c comm.Comm) error {
		return c.AllReduce(ctx, r.scalars, comm.Sum)
	})
	if err != nil {
		return s, err
	}
	if v, err = backend.ReadF32(r.be, r.scalars); err != nil {
		return s, err
	}
	return lossSums{sum: float64(v[0]), stop: v[1] > 0, count: int64(v[2])*countSplit + int64(v[3])}, nil
}
