package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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
	// dropSeed is the base of each micro-batch's dropout seed
	// (backend.DropoutSeed(dropSeed, micro-batch)), as the float64 script
	// draws it.
	dropSeed uint64
	ckpt     bool // activation checkpointing
	hp       struct {
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
	return newLoRARankIn(be, c, f, stage, backend.F32, backend.F32)
}

// newLoRARankIn is newLoRARank with the base (and activations) in baseDT
// and the adapters in adDT.
func newLoRARankIn(be backend.Backend, c comm.Comm, f *loraFixture, stage int, baseDT, adDT backend.DType) (*loraRank, error) {
	ctx := context.Background()
	bo := zero.DefaultOptions(stage)
	bo.Frozen, bo.PersistenceThreshold, bo.ParamDType = true, 0, baseDT
	base, err := zero.New(ctx, be, c, zero.LayoutOf(NewLayout(f.cfg)), bo)
	if err != nil {
		return nil, err
	}
	ao := zero.DefaultOptions(stage)
	ao.PersistenceThreshold, ao.ParamDType = 0, adDT
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
		r.m, err = New(be, f.cfg, Options{Store: base, ActDType: baseDT, Checkpoint: f.ckpt, LoRA: &LoRAOptions{Layout: f.alay, Store: ad, DType: adDT}})
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
			r.m.Train(backend.DropoutSeed(f.dropSeed, micro-1)) // the masks of lora_dropout, if any
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
		f0 := loadLoRAFixture(t, c)
		// The same run through the dropout path (one GEMM pair per module,
		// a mask per module) at p = 1e-12, which keeps every element here
		// and scales by 1 in fp32, must give the same results.
		nodrop := *f0
		l := f0.alay.LoRA()
		l.Dropout = 1e-12
		var err error
		if nodrop.alay, err = NewAdapterLayout(f0.cfg, l); err != nil {
			t.Fatal(err)
		}
		for _, w := range []struct {
			world, stage int
			f            *loraFixture
		}{{1, 0, f0}, {2, 2, f0}, {2, 3, f0}, {1, 0, &nodrop}, {2, 3, &nodrop}} {
			f := w.f
			name := fmt.Sprintf("%s/world%d_stage%d", c.name, w.world, w.stage)
			if f == &nodrop {
				name += "/dropout_path"
			}
			t.Run(name, func(t *testing.T) {
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

// gradWitness is the CPU backend, noting where the parameter-gradient
// outputs of backward ops live.
type gradWitness struct {
	*cpu.Backend
	dweights map[backend.Category]int  // MatmulBackward calls with a dweight, by its pool category
	outside  map[string]backend.Buffer // a norm, embedding or bias gradient written anywhere, by op
}

func (w *gradWitness) note(op string, grads ...backend.Buffer) {
	for _, g := range grads {
		if !g.IsNil() {
			w.outside[op] = g
		}
	}
}

func (w *gradWitness) MatmulBackward(dinp, dweight, dbias, dout, inp, weight backend.Buffer, N, C, OC int) {
	w.note("MatmulBackward (dbias)", dbias)
	if !dweight.IsNil() {
		w.dweights[dweight.Category()]++
	}
	w.Backend.MatmulBackward(dinp, dweight, dbias, dout, inp, weight, N, C, OC)
}

func (w *gradWitness) LayerNormBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd backend.Buffer, N, C int) {
	w.note("LayerNormBackward", dweight, dbias)
	w.Backend.LayerNormBackward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C)
}

func (w *gradWitness) RMSNormBackward(dinp, dweight, dout, inp, weight, rstd backend.Buffer, N, C int) {
	w.note("RMSNormBackward", dweight)
	w.Backend.RMSNormBackward(dinp, dweight, dout, inp, weight, rstd, N, C)
}

func (w *gradWitness) EncoderBackward(dwte, dwpe, dout, inp backend.Buffer, B, T, C int) {
	w.note("EncoderBackward", dwte, dwpe)
	w.Backend.EncoderBackward(dwte, dwpe, dout, inp, B, T, C)
}

// TestLoRAFrozenBaseHasNoGradients checks that backward computes nothing
// for the frozen GPT-2 or Llama base: its norms, embeddings, head and
// biases get no gradient output at all (bias "none": adapters have none),
// and the only weight-gradient GEMMs are the adapters' two per adapted
// projection slot, block and micro-batch: the stacked A's, straight into
// the adapters' gradients, and the block-diagonal B's, into its small
// workspace (out × modules·r) before each module's dB is added. The base's
// own linear layers run none, and no workspace stands in for their
// gradients.
func TestLoRAFrozenBaseHasNoGradients(t *testing.T) {
	for _, c := range loraCases {
		t.Run(c.name, func(t *testing.T) {
			f := loadLoRAFixture(t, c)
			w := &gradWitness{Backend: cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1}),
				dweights: map[backend.Category]int{}, outside: map[string]backend.Buffer{}}
			rk, err := newLoRARank(w, comm.NewNull(0, 1), f, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer rk.close()
			short := *f
			short.tokens = f.tokens[:f.hp.GAS*f.hp.B*f.hp.T+1] // one step
			if _, _, err := rk.train(&short, 0, 1); err != nil {
				t.Fatal(err)
			}
			for op, g := range w.outside {
				t.Errorf("%s wrote a parameter gradient into %v, but the base is frozen", op, g)
			}
			slots := 0
			for k := range numSlots {
				if len(f.alay.slots[k].mods) > 0 {
					slots++
				}
			}
			per := slots * f.cfg.L * f.hp.GAS
			want := map[backend.Category]int{backend.Grads: per, backend.Workspace: per}
			if !maps.Equal(w.dweights, want) {
				t.Errorf("weight-gradient GEMMs by destination %v, want %v (one A and one B for each of %d adapted slots in %d blocks, %d micro-batches)",
					w.dweights, want, slots, f.cfg.L, f.hp.GAS)
			}
		})
	}
}

// TestLoRAFP32AdaptersOnBF16Base trains fp32 adapters on a bf16 base (bf16
// activations), as PEFT does by default, against fp32 arithmetic on the same
// bf16-rounded base (the fp32 path TestLoRATrainingMatchesFloat64 holds to
// PyTorch's float64 within 1e-4). The first step's loss and pre-clip
// gradient norm are within bf16's tolerance of it (later steps are not
// compared: at the fixture's lr 0.02 AdamW turns bf16 noise into different
// trajectories). The adapters stay fp32: trained values are not bf16
// numbers. Memory: the base holds 2 bytes a parameter and nothing else, the
// adapters 4 bytes of parameters (their own master) plus their gradients
// and moments.
func TestLoRAFP32AdaptersOnBF16Base(t *testing.T) {
	for _, c := range loraCases {
		t.Run(c.name, func(t *testing.T) {
			f := loadLoRAFixture(t, c)
			rounded := *f
			rounded.base = make([]float32, len(f.base))
			for i, v := range f.base {
				rounded.base[i] = backend.F32FromBF16(backend.BF16FromF32(v))
			}
			rounded.tokens = f.tokens[:f.hp.GAS*f.hp.B*f.hp.T+1] // one step
			run := func(baseDT backend.DType) (norm, loss float64, ad []float32) {
				t.Helper()
				be := cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1})
				rk, err := newLoRARankIn(be, comm.NewNull(0, 1), &rounded, 0, baseDT, backend.F32)
				if err != nil {
					t.Fatal(err)
				}
				defer rk.close()
				norms, losses, err := rk.train(&rounded, 0, 1)
				if err != nil {
					t.Fatal(err)
				}
				if ad, err = rk.adapters.HostParams(context.Background()); err != nil {
					t.Fatal(err)
				}
				if baseDT == backend.BF16 {
					cur := be.Memory().Current[backend.Device]
					nb, na := int64(NewLayout(f.cfg).NumParams()), int64(f.alay.NumParams())
					live := 2 * int64(rk.base.Stats().LiveElements)
					if got, want := cur[backend.Params]-live, 2*nb+4*na; got != want {
						t.Errorf("parameter bytes %d, want %d (a bf16 base of %d and fp32 adapters of %d)", got, want, nb, na)
					}
					if cur[backend.Master] != 0 || cur[backend.Grads] != 4*na || cur[backend.Optimizer] != 8*na {
						t.Errorf("master %d, gradient %d, moment bytes %d; want 0, %d, %d (the adapters' only)",
							cur[backend.Master], cur[backend.Grads], cur[backend.Optimizer], 4*na, 8*na)
					}
				}
				return norms[0], losses[0], ad
			}
			refNorm, refLoss, _ := run(backend.F32)
			norm, loss, ad := run(backend.BF16)
			if !closeTo(loss, refLoss, 0, 1e-2) || !closeTo(norm, refNorm, 0, 2e-2) {
				t.Errorf("bf16 base, fp32 adapters: loss %.5g, gradient norm %.5g; fp32 on the same base %.5g, %.5g",
					loss, norm, refLoss, refNorm)
			}
			wide := 0
			for _, v := range ad {
				if backend.F32FromBF16(backend.BF16FromF32(v)) != v {
					wide++
				}
			}
			if wide < len(ad)/2 {
				t.Errorf("only %d of %d trained adapter values are not bf16 numbers: the adapters were not kept in fp32", wide, len(ad))
			}
			t.Logf("loss %.6g (fp32 %.6g), gradient norm %.6g (fp32 %.6g); %d of %d adapter values wider than bf16", loss, refLoss, norm, refNorm, wide, len(ad))
		})
	}
}

// TestLoRADropoutMatchesFloat64 trains the fixtures' adapters again with
// lora_dropout 0.1 and compares with PyTorch in float64 applying PEFT's
// dropout with the same masks (testdata/make_lora_fixtures.py draws them
// with backend.DropoutBits' generator): each adapted module's input gets
// its own mask per micro-batch, as PEFT's per-module Dropout does, also
// where modules share a fused projection (GPT-2's c_attn has one module;
// the Llama fixture's q and v share q/k/v's input). Losses, pre-clip norms
// and the final adapters within 1e-4, on one rank (the masks index the
// micro-batch's rows, which data parallelism splits) at stages 0 and 3,
// and with activation checkpointing, whose recompute draws the same masks.
func TestLoRADropoutMatchesFloat64(t *testing.T) {
	for _, c := range loraCases {
		f := loadLoRAFixture(t, c)
		ref, err := OpenSafetensors(filepath.Join("testdata", "lora", c.name, "dropout.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		defer ref.Close()
		l := f.alay.LoRA()
		if err := json.Unmarshal([]byte(ref.Metadata()["lora_dropout"]), &l.Dropout); err != nil || l.Dropout <= 0 {
			t.Fatalf("dropout.safetensors: lora_dropout %q: %v", ref.Metadata()["lora_dropout"], err)
		}
		if err := json.Unmarshal([]byte(ref.Metadata()["drop_seed"]), &f.dropSeed); err != nil {
			t.Fatalf("dropout.safetensors: drop_seed: %v", err)
		}
		if f.alay, err = NewAdapterLayout(f.cfg, l); err != nil {
			t.Fatal(err)
		}
		for _, v := range []struct {
			stage int
			ckpt  bool
		}{{0, false}, {3, false}, {3, true}} {
			stage := v.stage
			f.ckpt = v.ckpt
			t.Run(fmt.Sprintf("%s/stage%d/checkpointing=%v", c.name, stage, v.ckpt), func(t *testing.T) {
				ranks := commtest.NewWorld(t, 1, func(ctx context.Context, st comm.Store, r, size int) (comm.Comm, backend.Backend, error) {
					be := cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1})
					cm, err := tcp.New(ctx, st, be, tcp.Options{Rank: r, Size: size, Timeout: 20 * time.Second})
					return cm, be, err
				})
				rk, err := newLoRARank(ranks[0].Backend, ranks[0].Comm, f, stage)
				if err != nil {
					t.Fatal(err)
				}
				defer rk.close()
				norms, losses, err := rk.train(f, 0, 1)
				if err != nil {
					t.Fatal(err)
				}
				wantNorms, _, _ := ref.ReadFloat32("grad_norms")
				wantLosses, _, _ := ref.ReadFloat32("losses")
				for k := range wantNorms {
					if !closeTo(norms[k], float64(wantNorms[k]), 0, 1e-4) || !closeTo(losses[k], float64(wantLosses[k]), 0, 1e-4) {
						t.Errorf("step %d: loss %.7g, grad norm %.7g; PyTorch %.7g, %.7g", k+1, losses[k], norms[k], wantLosses[k], wantNorms[k])
					}
				}
				ad, err := rk.adapters.HostParams(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				worst := 0.0
				for _, ten := range f.alay.Tensors() {
					want, _, err := ref.ReadFloat32("final." + ten.Name)
					if err != nil {
						t.Fatal(err)
					}
					for i, w := range want {
						worst = max(worst, math.Abs(float64(ad[ten.Offset+i])-float64(w)))
					}
				}
				if worst > 1e-4 {
					t.Errorf("adapters differ from PyTorch's by up to %.2g", worst)
				}
				t.Logf("largest adapter difference %.2g", worst)
				// Evaluation (a Forward without Train) drops nothing: it is
				// repeatable, and differs from a training pass's loss.
				B, T := f.hp.B, f.hp.T
				in, tg := f.tokens[:B*T], f.tokens[1:B*T+1]
				e1, err1 := rk.m.Forward(in, tg, B, T)
				e2, err2 := rk.m.Forward(in, tg, B, T)
				rk.m.Train(1)
				tr, err3 := rk.m.Forward(in, tg, B, T)
				if err := errors.Join(err1, err2, err3); err != nil {
					t.Fatal(err)
				}
				if e1 != e2 || tr == e1 {
					t.Errorf("evaluation losses %v and %v (want equal), a training pass's %v (want different)", e1, e2, tr)
				}
			})
		}
	}
}

// TestAdapterFlopsPerToken checks a LoRA run's FLOPs per token against the
// count written out by hand for a Qwen3-shaped model with r 16 on every
// linear layer: the frozen matrices forward and input gradient (4 each),
// attention's scores and sum forward and backward, and the adapters' A and B
// forward and both gradients (6 each).
func TestAdapterFlopsPerToken(t *testing.T) {
	cfg, err := ParseHFConfig("config.json", []byte(`{"model_type": "qwen3", "hidden_size": 256, "intermediate_size": 768,
		"num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 50304,
		"tie_word_embeddings": true, "max_position_embeddings": 1024, "rms_norm_eps": 1e-6, "rope_theta": 1000000}`))
	if err != nil {
		t.Fatal(err)
	}
	lay, err := NewAdapterLayout(cfg, LoRA{R: 16, Alpha: 32, Target: []string{"all-linear"}})
	if err != nil {
		t.Fatal(err)
	}
	const T, r = 256, 16
	C, L, FF, Vp, q, kv := 256.0, 4.0, 768.0, 50304.0, 4*64.0, 2*64.0
	frozen := L*(C*q+C*kv+C*kv+q*C+3*C*FF) + Vp*C
	attn := 6 * L * T * q
	adapters := L * r * ((C + q) + (C + kv) + (C + kv) + (q + C) + 2*(C+FF) + (FF + C))
	want := 4*frozen + attn + 6*adapters
	if got := lay.FlopsPerToken(T); math.Abs(got-want) > 1e-9*want {
		t.Errorf("LoRA FLOPs per token %.6g, want %.6g", got, want)
	}
	if full := cfg.FlopsPerToken(T); !(lay.FlopsPerToken(T) < full) {
		t.Errorf("LoRA FLOPs per token %.6g, not below the full run's %.6g", lay.FlopsPerToken(T), full)
	}
}
