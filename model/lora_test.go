package model

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/comm/commtest"
	"github.com/gotrain/gotrain/comm/tcp"
	"github.com/gotrain/gotrain/zero"
)

// loraCase is one fixture of testdata/make_lora_fixtures.py: a base
// snapshot and, in testdata/lora/<name>, the PEFT adapter it starts from
// and the float64 run's results.
type loraCase struct{ name, base string }

var loraCases = []loraCase{
	{"gpt2", "testdata/pytorch_tiny"},
	{"llama_gqa", "testdata/llama_tiny/llama_gqa"},
}

// loraFixture is a case loaded.
type loraFixture struct {
	cfg     Config
	base    []float32
	alay    *AdapterLayout
	adapter []float32
	ref     *SafetensorsFile
	tokens  []int32
	hp      struct {
		LR, Eps, WeightDecay, Clip float64
		Betas                      [2]float64
		GAS, B, T                  int
	}
}

func loadLoRAFixture(t *testing.T, c loraCase) *loraFixture {
	t.Helper()
	f := &loraFixture{}
	var err error
	if f.cfg, f.base, err = LoadSnapshot(c.base); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("testdata", "lora", c.name)
	l, err := LoadAdapterConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if f.alay, err = NewAdapterLayout(f.cfg, l); err != nil {
		t.Fatal(err)
	}
	if f.adapter, err = LoadAdapter(dir, f.alay); err != nil {
		t.Fatal(err)
	}
	if f.ref, err = OpenSafetensors(filepath.Join(dir, "training.safetensors")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.ref.Close() })
	if f.tokens, _, err = f.ref.ReadInt32("tokens"); err != nil {
		t.Fatal(err)
	}
	meta := f.ref.Metadata()
	for key, dst := range map[string]any{"lr": &f.hp.LR, "eps": &f.hp.Eps, "weight_decay": &f.hp.WeightDecay,
		"clip": &f.hp.Clip, "betas": &f.hp.Betas, "gas": &f.hp.GAS, "B": &f.hp.B, "T": &f.hp.T} {
		if err := json.Unmarshal([]byte(meta[key]), dst); err != nil {
			t.Fatalf("metadata %s = %q: %v", key, meta[key], err)
		}
	}
	return f
}

// loraRank is one rank's frozen base, adapters and model.
type loraRank struct {
	base, adapters *zero.Engine
	m              *Model
}

func newLoRARank(be backend.Backend, c comm.Comm, f *loraFixture, stage int) (*loraRank, error) {
	ctx := context.Background()
	bo := zero.DefaultOptions(stage)
	bo.Frozen, bo.PersistenceThreshold = true, 0
	base, err := zero.New(ctx, be, c, zero.LayoutOf(NewLayout(f.cfg)), bo)
	if err != nil {
		return nil, err
	}
	ao := zero.DefaultOptions(stage)
	ao.PersistenceThreshold = 0
	ad, err := zero.NewBeside(base, zero.LayoutOf(f.alay), ao)
	if err != nil {
		base.Close()
		return nil, err
	}
	r := &loraRank{base: base, adapters: ad}
	lay := NewLayout(f.cfg)
	err = base.InitParams(func(g int) ([]float32, error) {
		off, n := lay.GroupRange(g)
		return f.base[off : off+n], nil
	})
	if err == nil {
		err = ad.InitParams(func(g int) ([]float32, error) {
			off, n := f.alay.GroupRange(g)
			return f.adapter[off : off+n], nil
		})
	}
	if err == nil {
		r.m, err = New(be, f.cfg, Options{Store: base, LoRA: &LoRAOptions{Layout: f.alay, Store: ad}})
	}
	if err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *loraRank) close() {
	if r.m != nil {
		r.m.Free()
	}
	r.base.Close()
	r.adapters.Close()
}

// train runs the fixture's steps on rank of world: each micro-batch's B
// rows are split over the ranks. It returns the pre-clip norms and the
// summed loss of each step over this rank's rows.
func (r *loraRank) train(f *loraFixture, rank, world int) (norms, losses []float64, err error) {
	B, T, GAS := f.hp.B, f.hp.T, f.hp.GAS
	rows := B / world
	scale := float32(1 / float64(GAS*B*T))
	steps := (len(f.tokens) - 1) / (GAS * B * T)
	micro := 0
	for k := 1; k <= steps; k++ {
		var loss float64
		for range GAS {
			off := micro*B*T + rank*rows*T
			micro++
			l, err := r.m.Forward(f.tokens[off:off+rows*T], f.tokens[off+1:off+rows*T+1], rows, T)
			if err != nil {
				return nil, nil, err
			}
			loss += float64(l) * float64(rows*T) / float64(GAS*B*T)
			if err := r.m.Backward(scale); err != nil {
				return nil, nil, err
			}
		}
		hp := backend.AdamWParams{LR: float32(f.hp.LR), Beta1: float32(f.hp.Betas[0]), Beta2: float32(f.hp.Betas[1]),
			Eps: float32(f.hp.Eps), WeightDecay: float32(f.hp.WeightDecay), Step: k}
		norm, err := r.adapters.Step(context.Background(), zero.StepInput{AdamW: hp, ClipNorm: f.hp.Clip})
		if err != nil {
			return nil, nil, err
		}
		norms, losses = append(norms, norm), append(losses, loss)
	}
	return norms, losses, nil
}

// TestLoRATrainingMatchesFloat64 trains adapters (A and B both nonzero at
// the start, read from a PEFT directory) on a frozen tiny GPT-2 (fused
// c_attn, every projection adapted) and a tiny Llama (GQA; q, v, o, up and
// down adapted, so the fused q/k/v and gate/up projections are partly
// adapted; rsLoRA scaling) for five AdamW steps with gradient accumulation
// 2 and clipping, against PyTorch in float64 (testdata/make_lora_fixtures.py):
// losses, pre-clip norms and every final adapter tensor within 1e-4, on
// one rank at stage 0 and on two ranks at ZeRO-2 and ZeRO-3. The frozen
// base comes out bit-identical.
func TestLoRATrainingMatchesFloat64(t *testing.T) {
	for _, c := range loraCases {
		f := loadLoRAFixture(t, c)
		for _, w := range []struct{ world, stage int }{{1, 0}, {2, 2}, {2, 3}} {
			t.Run(fmt.Sprintf("%s/world%d_stage%d", c.name, w.world, w.stage), func(t *testing.T) {
				results := make([]struct {
					norms, losses []float64
					base, ad      []float32
				}, w.world)
				ranks := commtest.NewWorld(t, w.world, func(ctx context.Context, st comm.Store, r, size int) (comm.Comm, backend.Backend, error) {
					be := cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1})
					cm, err := tcp.New(ctx, st, be, tcp.Options{Rank: r, Size: size, Timeout: 20 * time.Second})
					return cm, be, err
				})
				errs := commtest.OnEveryRank(w.world, func(rank int) error {
					rk, err := newLoRARank(ranks[rank].Backend, ranks[rank].Comm, f, w.stage)
					if err != nil {
						return err
					}
					defer rk.close()
					res := &results[rank]
					if res.norms, res.losses, err = rk.train(f, rank, w.world); err != nil {
						return err
					}
					if res.base, err = rk.base.HostParams(context.Background()); err != nil {
						return err
					}
					res.ad, err = rk.adapters.HostParams(context.Background())
					return err
				})
				if err := commtest.FirstErr(errs); err != nil {
					t.Fatal(err)
				}
				wantNorms, _, _ := f.ref.ReadFloat32("grad_norms")
				wantLosses, _, _ := f.ref.ReadFloat32("losses")
				for k, want := range wantNorms {
					if got := results[0].norms[k]; !closeTo(got, float64(want), 0, 1e-4) {
						t.Errorf("step %d: grad norm %.7g, PyTorch %.7g", k+1, got, want)
					}
				}
				if w.world == 1 {
					for k, want := range wantLosses {
						if got := results[0].losses[k]; !closeTo(got, float64(want), 0, 1e-4) {
							t.Errorf("step %d: loss %.7g, PyTorch %.7g", k+1, got, want)
						}
					}
				}
				for rank, res := range results {
					if !slices.Equal(res.base, f.base) {
						t.Errorf("rank %d: the frozen base changed", rank)
					}
					worst := 0.0
					for _, ten := range f.alay.Tensors() {
						want, _, err := f.ref.ReadFloat32("final." + ten.Name)
						if err != nil {
							t.Fatal(err)
						}
						got := res.ad[ten.Offset : ten.Offset+ten.Len]
						for i := range want {
							d := math.Abs(float64(got[i]) - float64(want[i]))
							worst = max(worst, d)
							if d > 1e-4 {
								t.Fatalf("rank %d: %s[%d] = %.7g, PyTorch %.7g", rank, ten.Name, i, got[i], want[i])
							}
						}
					}
					t.Logf("rank %d: largest adapter difference %.2g", rank, worst)
				}
			})
		}
	}
}

// TestLoRAMemoryHoldsOnlyAdapterState checks the accounting of a LoRA run
// on two ranks at every ZeRO stage, after a step: the master weights,
// gradients and AdamW moments held are exactly those of the adapters
// (the partition P of the adapter groups, padding included, or the whole
// adapters at stage 0) and nothing of the frozen base, which holds only
// its parameters (whole, or its stage-3 partition).
func TestLoRAMemoryHoldsOnlyAdapterState(t *testing.T) {
	f := loadLoRAFixture(t, loraCases[1])
	const world = 2
	var sizes, baseSizes []int
	for g := range f.alay.NumGroups() {
		_, n := f.alay.GroupRange(g)
		sizes = append(sizes, n)
	}
	lay := NewLayout(f.cfg)
	for g := range lay.NumGroups() {
		_, n := lay.GroupRange(g)
		baseSizes = append(baseSizes, n)
	}
	plan, basePlan := zero.NewPlan(sizes, world), zero.NewPlan(baseSizes, world)
	total := int64(f.alay.NumParams())
	for stage := range 4 {
		t.Run(fmt.Sprintf("stage%d", stage), func(t *testing.T) {
			P := int64(plan.PartLen)
			want := map[backend.Category]int64{
				backend.Master: 4 * P, backend.Optimizer: 8 * P, backend.Grads: 4 * P,
				backend.Params: 4 * (int64(basePlan.PaddedLen) + int64(plan.PaddedLen)),
			}
			switch stage {
			case 0: // replicated, unpadded; fp32 parameters are their own master
				want[backend.Master], want[backend.Optimizer], want[backend.Grads] = 0, 8*total, 4*total
				want[backend.Params] = 4 * (int64(lay.NumParams()) + total)
			case 1: // whole local gradients (padded) besides the reduced partition
				want[backend.Grads] += 4 * int64(plan.PaddedLen)
			case 3:
				want[backend.Params] = 4 * (int64(basePlan.PartLen) + P)
			}
			ranks := commtest.NewWorld(t, world, func(ctx context.Context, st comm.Store, r, size int) (comm.Comm, backend.Backend, error) {
				be := cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1})
				cm, err := tcp.New(ctx, st, be, tcp.Options{Rank: r, Size: size, Timeout: 20 * time.Second})
				return cm, be, err
			})
			got, live := make([]backend.MemoryStats, world), make([]int64, world)
			errs := commtest.OnEveryRank(world, func(rank int) error {
				rk, err := newLoRARank(ranks[rank].Backend, ranks[rank].Comm, f, stage)
				if err != nil {
					return err
				}
				defer rk.close()
				short := *f
				short.tokens = f.tokens[:f.hp.GAS*f.hp.B*f.hp.T+1] // one step
				if _, _, err := rk.train(&short, rank, world); err != nil {
					return err
				}
				got[rank] = ranks[rank].Backend.Memory()
				// Stage 3 may keep gathered windows for the next pass
				// (Params too): count them apart from the resident state.
				live[rank] = 4 * int64(rk.base.Stats().LiveElements+rk.adapters.Stats().LiveElements)
				return nil
			})
			if err := commtest.FirstErr(errs); err != nil {
				t.Fatal(err)
			}
			for rank, ms := range got {
				for cat, w := range want {
					g := ms.Current[backend.Device][cat]
					if cat == backend.Params {
						g -= live[rank]
					}
					if g != w {
						t.Errorf("rank %d: %s bytes %d, want %d", rank, cat, g, w)
					}
				}
			}
		})
	}
}
