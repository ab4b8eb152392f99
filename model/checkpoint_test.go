package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gotrain/gotrain/backend"
)

// TestCheckpointingGradientsBitIdentical: recomputing each block in backward
// from its kept input gives exactly the gradients (and loss) of keeping every
// activation, with the kept inputs on the device or in host memory, over
// several logit chunks (N > LogitChunkRows) and accumulated micro-batches,
// and over several classifier blocks without checkpointing (N >
// LogitBlockRows), whose head gradient must sum the same slabs.
func TestCheckpointingGradientsBitIdentical(t *testing.T) {
	cfg := GPT2(Config{MaxT: 160, V: 37, Vp: 128, L: 4, NH: 2, C: 16})
	host := testParams(cfg, 21)
	for _, bt := range [][2]int{{2, 150}, {15, 150}} { // N = 300: two chunks, one block; N = 2,250: nine chunks, two blocks
		B, T := bt[0], bt[1]
		rng := rand.New(rand.NewPCG(4, 5))
		batch := func() ([]int32, []int32) {
			in, tg := make([]int32, B*T), make([]int32, B*T)
			for i := range in {
				in[i], tg[i] = int32(rng.IntN(cfg.V)), int32(rng.IntN(cfg.V))
			}
			return in, tg
		}
		in1, tg1 := batch()
		in2, tg2 := batch()
		run := func(opts Options) (float32, []float32) {
			m := newModel(t, cfg, host, opts)
			var loss float32
			for _, b := range [][2][]int32{{in1, tg1}, {in2, tg2}} {
				l, err := m.Forward(b[0], b[1], B, T)
				if err != nil {
					t.Fatal(err)
				}
				loss += l
				if err := m.Backward(0.25); err != nil {
					t.Fatal(err)
				}
			}
			g, err := m.HostGrads()
			if err != nil {
				t.Fatal(err)
			}
			return loss, g
		}
		wantLoss, want := run(Options{})
		for _, pool := range []backend.Pool{backend.Device, backend.Host} {
			loss, got := run(Options{Checkpoint: true, CheckpointPool: pool})
			if loss != wantLoss {
				t.Errorf("B%d T%d pool %s: loss %v with checkpointing, %v without", B, T, pool, loss, wantLoss)
			}
			diff := 0
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					diff++
				}
			}
			if diff > 0 {
				t.Errorf("B%d T%d pool %s: %d of %d gradients differ in their bits", B, T, pool, diff, len(want))
			}
		}
	}
}

// TestCheckpointingActivationMemory measures (backend accounting) the
// activation memory of gpt2-tiny at B8 T256 with and without checkpointing:
// the kept block inputs replace every block's saved tensors and the (N,Vp)
// probabilities, which must cut it at least 3×. With cpu_checkpointing the
// kept inputs move to the host pool.
func TestCheckpointingActivationMemory(t *testing.T) {
	cfg, _ := Preset("gpt2-tiny")
	const B, T = 8, 256
	measure := func(opts Options) (device, host int64) {
		be := newCPU()
		m, err := newTestModel(be, cfg, opts, backend.F32)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Free()
		if err := m.ReserveActivations(B, T); err != nil {
			t.Fatal(err)
		}
		s := be.Memory()
		return s.Current[backend.Device][backend.Activations], s.Current[backend.Host][backend.Activations]
	}
	full, _ := measure(Options{})
	ckpt, _ := measure(Options{Checkpoint: true})
	if ratio := float64(full) / float64(ckpt); ratio < 3 {
		t.Errorf("activation bytes %d → %d with checkpointing: %.2f×, want ≥ 3×", full, ckpt, ratio)
	} else {
		t.Logf("gpt2-tiny B%d T%d activations: %.1f MiB → %.1f MiB (%.2f×)", B, T, float64(full)/(1<<20), float64(ckpt)/(1<<20), ratio)
	}
	if full != ActivationBytes(cfg, B, T, backend.F32, false) || ckpt != ActivationBytes(cfg, B, T, backend.F32, true) {
		t.Errorf("ActivationBytes disagrees with the backend's accounting")
	}
	dev, host := measure(Options{Checkpoint: true, CheckpointPool: backend.Host})
	kept := int64(cfg.L+1) * B * T * int64(cfg.C) * 4
	if host < kept || dev >= ckpt {
		t.Errorf("cpu checkpointing: host %d bytes (want ≥ %d kept inputs), device %d (want < %d)", host, kept, dev, ckpt)
	}
}
