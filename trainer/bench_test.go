package trainer_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/data"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/trainer"
)

// End-to-end training throughput on the CPU backend with the BLAS training
// uses, reported as tokens/s and as MFU against the sgemm roofline measured in
// the same run (blas.MeasurePeak). FLOPs per token: model.Config.FlopsPerToken.
func BenchmarkTrainGPT2TinyB8T256(b *testing.B) { benchTrain(b, "gpt2-tiny", 8, 256, 3) }
func BenchmarkTrainGPT2B4T64(b *testing.B)      { benchTrain(b, "gpt2", 4, 64, 2) }

// A Qwen3-shaped tiny model beside gpt2-tiny (L4, C256): 4 query heads of
// head_dim 64 sharing 2 key/value heads, q/k RMSNorm, SwiGLU 768 wide,
// RoPE, a tied head over the same 50,304-row vocabulary gpt2-tiny pads
// to, so the two differ only in the block.
func BenchmarkTrainQwen3TinyB8T256(b *testing.B) { benchTrain(b, qwen3Tiny, 8, 256, 3) }

// LoRA fine-tuning of the same Qwen3-shaped model, next to the full run
// above: adapters of rank 16 on every linear layer (PEFT's all-linear) on
// the frozen base. Its GFLOP/s and MFU count what a LoRA step multiplies
// (AdapterLayout.FlopsPerToken: no weight gradients for the frozen base),
// so its tokens/s compare with the full run's and its MFU is utilisation.
func BenchmarkTrainQwen3TinyLoRAB8T256(b *testing.B) {
	benchTrainWith(b, qwen3Tiny, 8, 256, 3, &trainer.LoRAOptions{Config: model.LoRA{R: 16, Alpha: 32, Target: []string{"all-linear"}}})
}

const qwen3Tiny = `{"model_type": "qwen3", "hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 4,
	"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 50304, "tie_word_embeddings": true,
	"max_position_embeddings": 4096, "rope_theta": 1000000, "rms_norm_eps": 1e-6}`

// benchTrain trains the preset, or the config.json text model, for
// steps+1 steps.
func benchTrain(b *testing.B, name string, B, T, steps int) {
	benchTrainWith(b, name, B, T, steps, nil)
}

// benchTrainWith is benchTrain, with LoRA adapters on the frozen model
// when lora is set.
func benchTrainWith(b *testing.B, name string, B, T, steps int, lora *trainer.LoRAOptions) {
	preset := name
	mcfg, err := model.ByName(name)
	if err != nil {
		if mcfg, err = model.ParseHFConfig("bench config.json", []byte(name)); err != nil {
			b.Fatal(err)
		}
		preset = mcfg.Summary()
	}
	if lora != nil {
		preset += fmt.Sprintf(" LoRA r%d %v", lora.Config.R, lora.Config.Target)
	}
	threads := runtime.GOMAXPROCS(0)
	impl, info := blas.Default(threads)
	peak := blas.MeasurePeak(impl, 1) * 1e9

	dir := b.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	tokens := make([]int32, (steps+2)*B*T+1)
	for i := range tokens {
		tokens[i] = int32(rng.IntN(mcfg.V))
	}
	shard := filepath.Join(dir, "train_000000.bin")
	if err := data.WriteShard(shard, data.ShardGPT2, tokens); err != nil {
		b.Fatal(err)
	}
	cfgJSON := `{"train_micro_batch_size_per_gpu": ` + itoa(B) + `, "gradient_accumulation_steps": 1,
		"gradient_clipping": 1.0, "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "weight_decay": 0.1}}}`
	cfg, err := config.Parse("bench.json", []byte(cfgJSON), config.Options{Strict: true})
	if err != nil {
		b.Fatal(err)
	}
	batch, err := cfg.Resolve(1)
	if err != nil {
		b.Fatal(err)
	}
	var tps, mfu float64
	for i := 0; i < b.N; i++ {
		be := cpu.New(cpu.Options{Gemm: impl, Threads: threads})
		res, err := trainer.Run(context.Background(), be, trainer.Options{
			Config: cfg, Batch: batch, Model: mcfg, Seed: 1, Data: []string{shard},
			SeqLen: T, MaxSteps: steps + 1, PeakFLOPS: peak, LoRA: lora,
		})
		if err != nil {
			b.Fatal(err)
		}
		tps, mfu = res.TokensPerSecond, res.MFU
	}
	b.ReportMetric(tps, "tokens/s")
	b.ReportMetric(100*mfu, "MFU%")
	b.ReportMetric(peak/1e9, "roofline-GFLOP/s")
	flops := mcfg.FlopsPerToken(T)
	if lora != nil {
		alay, err := model.NewAdapterLayout(mcfg, lora.Config)
		if err != nil {
			b.Fatal(err)
		}
		flops = alay.FlopsPerToken(T)
	}
	b.ReportMetric(tps*flops/1e9, "GFLOP/s")
	b.Logf("%s B%d T%d: %.0f tokens/s, %.1f GFLOP/s, MFU %.1f%% of the %.1f GFLOP/s sgemm roofline (%s %s)",
		preset, B, T, tps, tps*flops/1e9, 100*mfu, peak/1e9, info.Name, info.CoreType)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var d []byte
	for ; n > 0; n /= 10 {
		d = append([]byte{byte('0' + n%10)}, d...)
	}
	return string(d)
}
