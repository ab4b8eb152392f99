package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/comm/ncclcomm"
	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/cuda"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/nccl"
	"github.com/gotrain/gotrain/trainer"
)

// qwen3Fixture writes a tiny Qwen3 config (RMSNorm, rotary positions with
// per-head q/k norms, grouped-query attention, SwiGLU, tied embeddings)
// whose vocabulary fits distFixture's shard.
func qwen3Fixture(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "qwen3.json")
	if err := os.WriteFile(p, []byte(`{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
		"hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4,
		"num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 64, "rms_norm_eps": 1e-6,
		"rope_theta": 1000000.0, "tie_word_embeddings": true, "vocab_size": 64, "hidden_act": "silu"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// ZeRO over NCCL on two emulated GPUs in one process (the mock NCCL joins
// ranks that are threads of one process): stages 0–3 with overlap_comm,
// and with the optimizer (and at stage 3 the parameters) offloaded to
// pinned host memory,
// so gradient reduce-scatters run on the communicator's stream from the
// engine's goroutine while the backward pass continues on the compute
// stream, reproduce the one-process CPU losses, for a tiny GPT-2 and a
// tiny Qwen3 (the Llama family's ops on the GPU).
func TestZeROOverNCCLMatchesCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("trains on emulated GPUs")
	}
	env := mockGPUEnv(t, 2)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	dir, gpt2Cfg, shard := distFixture(t)
	drv, err := cuda.Load(cuda.Options{})
	if err != nil {
		t.Fatal(err)
	}
	lib, err := nccl.Load(nccl.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{gpt2Cfg, qwen3Fixture(t, dir)} {
		mcfg, err := model.ByName(path)
		if err != nil {
			t.Fatal(err)
		}
		zeroOverNCCL(t, drv, lib, filepath.Join(dir, mcfg.Arch.String()), mcfg, shard)
	}
}

// zeroOverNCCL trains mcfg on one CPU process, then at every ZeRO stage
// and offload on two emulated GPUs, and compares the losses step by step.
func zeroOverNCCL(t *testing.T, drv *cuda.Driver, lib *nccl.Library, dir string, mcfg model.Config, shard string) {
	const steps = 4
	parse := func(stage, micro, world int, offload string) (*config.Config, config.Batch) {
		text := fmt.Sprintf(`{"train_micro_batch_size_per_gpu": %d, "gradient_accumulation_steps": 2,
			"gradient_clipping": 0.5, "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "weight_decay": 0.1}},
			"zero_optimization": {"stage": %d, "overlap_comm": true, "stage3_param_persistence_threshold": 100 %s}}`,
			micro, stage, offload)
		cfg, err := config.Parse("test.json", []byte(text), config.Options{Strict: true,
			Overrides: config.Overrides{WorldSize: world, Hidden: mcfg.C, TotalSteps: config.Some(steps)}})
		if err != nil {
			t.Fatal(err)
		}
		b, err := cfg.Resolve(world)
		if err != nil {
			t.Fatal(err)
		}
		return cfg, b
	}
	opts := func(cfg *config.Config, b config.Batch, out string, cm comm.Comm) trainer.Options {
		return trainer.Options{Config: cfg, Batch: b, Model: mcfg, Comm: cm, Seed: 1, Data: []string{shard}, SeqLen: 16,
			MaxSteps: steps, OutputDir: out, Resume: "never"}
	}
	cpuBE, _, err := newBackend(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, b := parse(0, 4, 1, "")
	ref := filepath.Join(dir, "cpu")
	if _, err := trainer.Run(context.Background(), cpuBE, opts(cfg, b, ref, nil)); err != nil {
		t.Fatal(err)
	}
	want := readLosses(t, filepath.Join(ref, "metrics.jsonl"))

	const offOpt = `, "offload_optimizer": {"device": "cpu", "pin_memory": true}`
	const offParam = `, "offload_param": {"device": "cpu", "pin_memory": true}`
	for i, tc := range []struct {
		stage   int
		offload string
	}{{0, ""}, {1, ""}, {2, ""}, {3, ""}, {2, offOpt}, {3, offOpt + offParam}} {
		stage := tc.stage
		out := filepath.Join(dir, fmt.Sprintf("nccl%d", i))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for r := 0; r < 2; r++ {
			wg.Add(1)
			go func(r int) {
				defer wg.Done()
				errs[r] = ncclRank(drv, lib, r, ln, func(g *gpuRank, cm comm.Comm) error {
					cfg, b := parse(stage, 2, 2, tc.offload)
					_, err := trainer.Run(context.Background(), g.be, opts(cfg, b, out, cm))
					return err
				})
			}(r)
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("%s stage %d%s: rank 0: %v; rank 1: %v", mcfg.Arch, stage, tc.offload, errs[0], errs[1])
		}
		got := readLosses(t, filepath.Join(out, "metrics.jsonl"))
		if len(got) != steps {
			t.Fatalf("%s stage %d: %d steps logged", mcfg.Arch, stage, len(got))
		}
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-4*math.Abs(want[i]) {
				t.Errorf("%s stage %d%s step %d: loss %.7f on 2 emulated GPUs, %.7f on one CPU process",
					mcfg.Arch, stage, tc.offload, i+1, got[i], want[i])
			}
		}
		t.Logf("%s stage %d%s, 2 GPUs over NCCL: %.6f … %.6f (cpu %.6f … %.6f)", mcfg.Arch, stage, tc.offload,
			got[0], got[steps-1], want[0], want[steps-1])
	}
}

// ncclRank opens mock GPU r, its backend and its NCCL communicator (after
// an in-process rendezvous on ln), then runs fn.
func ncclRank(drv *cuda.Driver, lib *nccl.Library, r int, ln net.Listener, fn func(*gpuRank, comm.Comm) error) error {
	dev, err := drv.Open(r)
	if err != nil {
		return err
	}
	be, err := newCUDABackend(dev, 1, false)
	if err != nil {
		_ = dev.Close()
		return err
	}
	g := &gpuRank{drv: drv, dev: dev, be: be}
	defer g.Close()
	ctx := context.Background()
	// Generous timeouts: on a loaded 2-core machine one emulated rank can
	// take over a minute to reach a collective the other already waits in.
	o := comm.RendezvousOptions{Rank: r, Size: 2, Addr: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port, Timeout: 5 * time.Minute}
	if r == 0 {
		o.Listener = ln
	}
	st, err := comm.Rendezvous(ctx, o)
	if err != nil {
		return err
	}
	defer st.Close()
	cm, err := ncclcomm.New(ctx, ncclcomm.Options{Rank: r, Size: 2, Store: st, Device: dev, Lib: lib,
		Timeout: 5 * time.Minute, ComputeStream: be.Stream()})
	if err != nil {
		return err
	}
	defer cm.Close()
	return fn(g, cm)
}
